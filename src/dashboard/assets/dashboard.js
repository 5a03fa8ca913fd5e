// voicenote dashboard: the few things plain HTML cannot do. Pages work without it except for
// live status updates and the copy button.
'use strict';

// Copy buttons: <button data-copy="ELEMENT_ID"> copies that element's text.
document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.getAttribute('data-copy'));
  if (!source) return;
  const text = source.textContent.trim();
  const said = button.parentElement && button.parentElement.querySelector('.copied');
  try {
    await navigator.clipboard.writeText(text);
    if (said) said.textContent = 'Copied.';
  } catch {
    // No clipboard permission (plain http on another host): select the text so Ctrl+C does it.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (said) said.textContent = 'Selected: press Ctrl+C to copy.';
  }
});

// WhatsApp linking: poll the session until it is connected, expired or gone.
const FINAL = new Set(['connected', 'qr_expired', 'disconnected']);
for (const panel of document.querySelectorAll('[data-poll]')) {
  const url = panel.getAttribute('data-poll');
  const statusText = panel.querySelector('[data-field="status_text"]');
  const phone = panel.querySelector('[data-field="phone"]');
  const qr = panel.querySelector('[data-when="qr_pending"]');
  const tick = async () => {
    let session;
    try {
      const res = await fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      if (res.status === 404) {
        statusText.textContent = 'deleted';
        if (qr) qr.hidden = true;
        return;
      }
      if (!res.ok) throw new Error(String(res.status));
      session = await res.json();
    } catch {
      setTimeout(tick, 3000);
      return;
    }
    panel.setAttribute('data-status', session.status);
    // While pending, the panel keeps its own words (it knows whether there is a QR to scan or a code to type).
    if (session.status !== 'qr_pending') statusText.textContent = session.status_text;
    // `who`: how a linked Telegram account is known (@username); a WhatsApp session by its number.
    const who = session.who || (session.phone_number ? `+${session.phone_number}` : '');
    if (phone) phone.textContent = who ? ` as ${who}` : '';
    if (qr) qr.hidden = session.status !== 'qr_pending';
    // A code the platform renews while it waits (Telegram's login token): show the current one.
    const image = panel.querySelector('img[data-qr]');
    if (image && session.qr_code && image.getAttribute('src') !== session.qr_code) image.setAttribute('src', session.qr_code);
    if (!FINAL.has(session.status)) setTimeout(tick, 1000);
  };
  tick();
}

// The sessions table: rows still being linked follow their session too, so "connected" shows
// without a reload (the linking panel above updates the same way).
for (const row of document.querySelectorAll('tr[data-row-poll]')) {
  if (FINAL.has(row.getAttribute('data-status'))) continue;
  const url = row.getAttribute('data-row-poll');
  const cell = (name) => row.querySelector(`[data-field="${name}"]`);
  const tick = async () => {
    let session;
    try {
      const res = await fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      if (res.status === 404) return;
      if (!res.ok) throw new Error(String(res.status));
      session = await res.json();
    } catch {
      setTimeout(tick, 3000);
      return;
    }
    row.setAttribute('data-status', session.status);
    cell('status_text').textContent = session.status_text;
    cell('phone_number').textContent = session.who || (session.phone_number ? `+${session.phone_number}` : '—');
    if (session.last_connected_at) {
      const time = document.createElement('time');
      time.dateTime = session.last_connected_at;
      time.textContent = `${session.last_connected_at.slice(0, 19).replace('T', ' ')} UTC`;
      cell('last_connected_at').replaceChildren(time);
    }
    if (!FINAL.has(session.status)) setTimeout(tick, 1000);
  };
  tick();
}

// The senders table: every row follows its sender (status, why, until, today's count) while the page is open.
for (const row of document.querySelectorAll('tr[data-sender-poll]')) {
  const url = row.getAttribute('data-sender-poll');
  const cell = (name) => row.querySelector(`[data-field="${name}"]`);
  const timeOrDash = (iso) => {
    if (!iso) return document.createTextNode('—');
    const time = document.createElement('time');
    time.dateTime = iso;
    time.textContent = `${iso.slice(0, 19).replace('T', ' ')} UTC`;
    return time;
  };
  const tick = async () => {
    try {
      const res = await fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      if (res.status === 404) return;
      if (!res.ok) throw new Error(String(res.status));
      const sender = await res.json();
      row.setAttribute('data-status', sender.status);
      cell('status_text').textContent = sender.status_text;
      cell('reason').textContent = sender.reason || '—';
      cell('until').replaceChildren(timeOrDash(sender.until));
      cell('today').textContent = sender.today_text;
      cell('last_sent_at').replaceChildren(timeOrDash(sender.last_sent_at));
    } catch {
      // Try again at the next tick.
    }
    setTimeout(tick, 5000);
  };
  setTimeout(tick, 5000);
}

// Forms that undo something ask first: <form data-confirm="…">.
document.addEventListener('submit', (event) => {
  const form = event.target instanceof HTMLFormElement ? event.target : null;
  const question = form && form.getAttribute('data-confirm');
  if (question && !window.confirm(question)) event.preventDefault();
});

// On a phone each table row is drawn as a card (dashboard.css): every cell is named by its column's
// header, so a value is never shown without what it is.
for (const table of document.querySelectorAll('.table-wrap table')) {
  const headers = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll('tbody tr')) {
    [...row.children].forEach((cell, i) => {
      if (headers[i]) cell.setAttribute('data-label', headers[i]);
    });
  }
}
