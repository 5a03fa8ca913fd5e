import type { ReplyRow } from '../../store/replies.js';
import type { MessageRow } from '../../store/messages.js';
import { html, timeCell, type Html } from '../html.js';

/** In the message list: a mark on notes their recipient answered. */
export function answeredMark(row: MessageRow): Html {
  return row.first_replied_at == null ? html`` : html` <span class="replied-mark" data-replied="true" title="The recipient replied">replied</span>`;
}

const TYPE_TEXT: Record<string, string> = {
  text: 'text',
  voice: 'voice message',
  audio: 'audio file',
  image: 'photo',
  video: 'video',
  document: 'document',
  sticker: 'sticker',
  other: 'message',
};

/** On the message's page: what the recipient answered, oldest first (kinds and texts only; media is never kept). */
export function repliesSection(row: MessageRow, replies: readonly ReplyRow[]): Html {
  return html`<h2>Replies</h2>
${
  replies.length === 0
    ? html`<p data-replies="none">${row.status === 'delivered' ? 'No reply yet.' : 'Replies come after delivery.'}</p>`
    : html`<ol class="replies" data-replies="some">${replies.map(
        (r) => html`<li data-reply-id="${r.id}">${timeCell(r.received_at)} — <span data-reply-type="${r.type}">${TYPE_TEXT[r.type] ?? r.type}</span>${
          r.text === null ? '' : html`: <q>${r.text}</q>`
        }</li>`,
      )}</ol>`
}`;
}
