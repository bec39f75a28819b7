// screens/notifications.js — `#/notifications`: where you are told when your
// endpoints break. Each channel is a mailbox or a team chat (Slack, Microsoft
// Teams, Discord incoming webhooks) with the notices it gets (GET, POST and
// DELETE …/notifications). A chat's webhook URL is shown with its secret part
// hidden, as the API answers it. Adding and removing needs `endpoints`.
// Its words go through i18n.js; the chats' names (Slack…) stay as they are.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { dateTime } from '../format.js';
import { msg, t, tx } from '../i18n.js';
import { announce, clearProblem, confirmAction, empty, field, hidden, loading, problemSlot, select, showProblem, tieProblem, untieProblem, whileBusy } from '../ui.js';

const KINDS = [
  ['email', msg('E-mail')],
  ['slack', 'Slack'],
  ['teams', 'Microsoft Teams'],
  ['discord', 'Discord'],
];

const EVENTS = [
  ['endpoint.failing', msg('An endpoint starts failing')],
  ['endpoint.recovered', msg('A failing endpoint recovers')],
  ['endpoint.disabled', msg('An endpoint is disabled')],
  ['endpoint.enabled', msg('An endpoint is enabled again')],
  ['delivery.dead', msg('Deliveries fail for good (counted together)')],
  ['replay.finished', msg('A recovery finishes')],
];

/** A kind's name ("E-mail", "Slack"), or the kind itself if unknown. */
function kindName(kind) {
  const name = KINDS.find(([value]) => value === kind)?.[1];
  return name ? t(name) : kind;
}

/** An event's words, or the event itself if unknown. */
function eventName(event) {
  const name = EVENTS.find(([value]) => value === event)?.[1];
  return name ? t(name) : event;
}

export async function notificationsScreen(ctx) {
  ctx.title(t('Notifications'));
  const canChange = ctx.can('endpoints');
  const list = h('div', { 'data-test': 'channels' }, loading(t('Loading your channels…')));
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, t('Notifications'))),
    h(
      'p',
      {},
      t('Be told when your endpoints fail, recover, are disabled or lose deliveries: by e-mail, or in your team’s chat. Each message names the endpoint, what happened and since when, and links here.'),
    ),
    list,
  );
  const draw = async () => {
    const answer = await api.listNotificationChannels({ signal: ctx.signal });
    replace(
      list,
      h('h2', { id: 'channels-heading', tabindex: '-1' }, t('Your channels')),
      answer.data.length ? channelList(answer.data, canChange, draw) : empty(t('No channels yet: nobody is told when an endpoint breaks.')),
    );
  };
  await draw();
  if (canChange) ctx.root.append(addForm(draw));
  else ctx.root.append(h('p', { class: 'muted' }, t('Your access lets you see the channels, not change them.')));
}

function channelList(channels, canChange, redraw) {
  const problem = problemSlot();
  return h(
    'div',
    {},
    problem,
    h(
      'ul',
      { class: 'channels' },
      channels.map((channel) =>
        h(
          'li',
          { class: 'channel', 'data-test': 'channel', 'data-kind': channel.kind },
          h('p', { class: 'channel-to' }, h('strong', {}, kindName(channel.kind)), ' ', h('code', { class: 'channel-address' }, channel.to)),
          !channel.enabled &&
            h(
              'p',
              { class: 'problem', 'data-test': 'channel-disabled' },
              channel.disabled_reason === 'gone'
                ? t('Disabled: the chat said this webhook is gone (the channel may have been archived). Remove it and add a new one.')
                : t('Disabled: it failed for too long. Remove it and add it again once it works.'),
            ),
          h(
            'p',
            { class: 'muted' },
            t('Tells of: {events}.', { events: channel.events.map((e) => eventName(e).toLowerCase()).join('; ') }),
            tx(' Added {time}.', { time: h('time', { datetime: channel.created_at }, dateTime(channel.created_at)) }),
          ),
          canChange && removeButton(channel, problem, redraw),
        ),
      ),
    ),
  );
}

function removeButton(channel, problem, redraw) {
  const button = h('button', { type: 'button', class: 'danger', 'data-test': 'channel-remove', 'data-mutating': true }, t('Remove'), hidden(` ${kindName(channel.kind)} ${channel.to}`));
  button.addEventListener('click', async () => {
    clearProblem(problem);
    const sure = await confirmAction({
      title: t('Remove this channel?'),
      message: t('{to} is told nothing more.', { to: channel.to }),
      yes: t('Remove channel'),
    });
    if (!sure) return;
    try {
      await whileBusy(button, () => api.deleteNotificationChannel(channel.id));
      announce(t('Channel removed.'));
      await redraw();
      // The button is gone with its row: the focus goes to the list's heading.
      document.getElementById('channels-heading')?.focus();
    } catch (error) {
      showProblem(problem, error);
    }
  });
  return button;
}

function addForm(redraw) {
  const kinds = KINDS.map(([value]) => [value, kindName(value)]);
  const kind = select({ id: 'channel-kind', name: 'kind', 'data-test': 'channel-kind' }, kinds, 'email');
  const to = h('input', { id: 'channel-to', name: 'to', type: 'email', autocomplete: 'email', required: true, 'data-test': 'channel-to' });
  const toField = field(t('E-mail address'), to, t('One mailbox; a team list works best.'));
  const boxes = EVENTS.map(([value, label]) =>
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value, checked: true }), h('span', { class: 'check-text' }, t(label))),
  );
  const events = h('fieldset', { class: 'channel-events', 'data-test': 'channel-events' }, h('legend', {}, t('Tell of')), boxes);
  const problem = problemSlot();
  const add = h('button', { type: 'submit', 'data-test': 'channel-add', 'data-mutating': true }, t('Add channel'));
  // The address field becomes a URL field for chats, with words to match.
  kind.addEventListener('change', () => {
    const email = kind.value === 'email';
    to.type = email ? 'email' : 'url';
    to.autocomplete = email ? 'email' : 'off';
    const chat = kindName(kind.value);
    toField.querySelector('label').textContent = email ? t('E-mail address') : t('{chat} incoming webhook URL', { chat });
    toField.querySelector('.hint').textContent = email
      ? t('One mailbox; a team list works best.')
      : t(
          'Make an incoming webhook in {chat} for the channel to post in, and paste its URL. It is kept secret: only its start and its last four characters are shown again.',
          { chat },
        );
  });
  const form = h(
    'form',
    { novalidate: true, class: 'channel-form', 'aria-labelledby': 'add-channel-heading' },
    h('h2', { id: 'add-channel-heading' }, t('Add a channel')),
    field(t('Where'), kind),
    toField,
    events,
    problem,
    h('div', { class: 'actions' }, add),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    untieProblem(to, problem);
    const picked = boxes.map((box) => box.querySelector('input')).filter((box) => box.checked).map((box) => box.value);
    const first = boxes[0].querySelector('input');
    untieProblem(first, problem);
    if (!picked.length) {
      replace(problem, h('p', { class: 'problem', role: 'alert', 'data-test': 'problem' }, t('Pick at least one thing to be told of.')));
      tieProblem(first, problem);
      return;
    }
    try {
      const body = { kind: kind.value, to: to.value.trim() };
      if (picked.length < EVENTS.length) body.events = picked;
      await whileBusy(add, () => api.createNotificationChannel(body));
      announce(t('{kind} channel added.', { kind: kindName(kind.value) }));
      to.value = '';
      await redraw();
    } catch (error) {
      showProblem(problem, error);
      // Tied to the address only when it is what was refused.
      const detail = String(error?.detail ?? error?.message ?? '');
      if (error?.code === 'destination_forbidden' || /^(to|url)\b/.test(detail)) tieProblem(to, problem);
    }
  });
  return h('section', { class: 'section' }, form);
}
