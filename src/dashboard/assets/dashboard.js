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
    statusText.textContent = session.status_text;
    if (phone) phone.textContent = session.phone_number ? ` as +${session.phone_number}` : '';
    if (qr) qr.hidden = session.status !== 'qr_pending';
    if (!FINAL.has(session.status)) setTimeout(tick, 1000);
  };
  tick();
}
