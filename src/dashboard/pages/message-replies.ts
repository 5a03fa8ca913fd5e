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

/** On the message's page: whether its sender is listened to, why not when refused, and the button that ends it. */
export function listeningSection(row: MessageRow, listening: { status: string; reason: string | null; until: string } | null, csrf: string): Html {
  if (!listening) return html``;
  if (row.platform === 'linkedin') return linkedinListeningSection(row, listening, csrf);
  return html`<h2>Listening for replies</h2>
<p data-listening="${listening.status}">${
    listening.status === 'listening'
      ? html`This bot is listened to for replies until ${timeCell(Date.parse(listening.until))} (30 days after its last note); its token is kept, encrypted, until then.`
      : html`This bot cannot be listened to: ${listening.reason ?? 'the platform refused'}.`
  }</p>
<form method="post" action="/dashboard/messages/${row.id}/listening/delete" class="stop-listening">
<input type="hidden" name="_csrf" value="${csrf}">
<button type="submit">Stop listening and erase the bot token</button>
</form>`;
}

/** A LinkedIn li_at listened to: its conversations read now and then, its session kept until the window ends. */
function linkedinListeningSection(row: MessageRow, listening: { until: string }, csrf: string): Html {
  return html`<h2>Listening for replies</h2>
<p data-listening="listening">This LinkedIn session's conversations are read for replies until ${timeCell(Date.parse(listening.until))} (14 days after its last note); its cookies are kept, encrypted, until then.</p>
<form method="post" action="/dashboard/messages/${row.id}/listening/delete" class="stop-listening">
<input type="hidden" name="_csrf" value="${csrf}">
<button type="submit">Stop listening and erase the LinkedIn session</button>
</form>`;
}
