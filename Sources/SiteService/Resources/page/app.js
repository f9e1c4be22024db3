// The practice manager's page: talks to /api/v1 only (docs/site-service.md). Every change is a
// dry run first (what changes at which terminal, in words), then applied, then can be undone.
"use strict";

const words = {
  de: {
    live: "Jetzt", "live-hint": "Wer gerade erreichbar ist, und was an den Terminals geschieht.", online: "erreichbar", offline: "nicht erreichbar",
    "in-call": "im Gespräch", dnd: "nicht stören", events: "Ereignisse", test: "Test senden", "test-sent": "„{x}“ gesendet an {r}.",
    "ev-delivered": "„{x}“ ist bei {r} angekommen", "ev-sent": "„{x}“: {d} von {n} haben sie", "ev-acknowledged": "„{x}“ bestätigt von {r}",
    "ev-presence": "{r} ist {s}", "ev-call": "Gespräch {r}", "ev-ended": "Gespräch beendet", "ev-member-up": "Verbindung zur Anlage steht",
    "ev-member-down": "Verbindung zur Anlage unterbrochen", "ev-lost": "{n} Ereignisse verpasst", "no-member": "Die Anlage ist von hier aus nicht erreichbar.",
    title: "Praxis-Intercom", login: "Anmelden", logout: "Abmelden", name: "Name", password: "Passwort",
    terminals: "Terminals", "terminals-hint": "Ein neues Terminal nennt seinen Freigabecode, wenn man eine Taste drückt. Geben Sie ihn hier ein.",
    room: "Raum", terminal: "Terminal", software: "Software", state: "Zustand", pending: "wartet auf Freigabe", approved: "freigegeben",
    revoked: "gesperrt", unknown: "nicht erreicht", code: "Freigabecode", approve: "Freigeben", revoke: "Sperren",
    "approve-what": "Das Terminal mit dem Code {c} wird für „{r}“ freigegeben.", "revoke-what": "Das Terminal von „{r}“ wird gesperrt; es kann nie wieder freigegeben werden.",
    overview: "Übersicht", notifications: "Benachrichtigungen", keys: "Tasten und Lichter", versions: "Änderungen",
    version: "Version", rooms: "Räume", label: "Bezeichnung", spoken: "Gesprochener Text", recipients: "Empfänger",
    tone: "Ton", priority: "Dringlichkeit", "new-notification": "Neue Benachrichtigung", "tone-default": "passend zur Dringlichkeit",
    "tone-gong": "Gong", "tone-bell": "Glocke", "tone-alert": "Hinweis", "tone-alarm": "Alarm", normal: "normal", urgent: "dringend", emergency: "Notfall",
    preview: "Vorschau", "keys-hint": "Diese Tasten gelten an jedem Terminal.", key: "Taste", action: "Wirkung",
    "assign-key": "Taste belegen", when: "Wann", who: "Wer", "preview-title": "Das ändert sich", apply: "Übernehmen",
    discard: "Verwerfen", undo: "Rückgängig machen", remove: "Entfernen", restore: "Wiederherstellen",
    "wrong-login": "Name oder Passwort falsch.", "too-many": "Zu viele Versuche. Bitte eine Minute warten.",
    "no-change": "Das ändert an keinem Terminal etwas.", "in-force": "Version {v} gilt.", "stale": "Inzwischen hat jemand anderes geändert. Die Seite zeigt jetzt den neuen Stand.",
    took: "hat sie übernommen", already_held: "hatte sie schon", unreached: "nicht erreicht (übernimmt sie von den anderen, sobald es läuft)",
    refused: "hat sie abgelehnt", busy: "war beschäftigt", other_site: "gehört nicht zu dieser Praxis",
    added: "neu", removed: "entfällt", "terminal-added": "neues Terminal", "terminal-removed": "Terminal entfällt",
    "notification-new": "Benachrichtigung „{x}“ kommt hinzu", "notification-gone": "Benachrichtigung „{x}“ entfällt",
    "notification-changed": "Benachrichtigung „{x}“ ändert sich", "key-set": "Taste {k}: {a}", "key-gone": "Taste {k} ist nicht mehr belegt",
    "sends": "sendet „{x}“", "calls": "ruft „{x}“", hang_up: "legt auf", answer: "nimmt an", decline: "lehnt ab",
    toggle_dnd: "Nicht stören an/aus", toggle_mic_mute: "Mikrofon stumm an/aus", acknowledge: "bestätigt", acknowledge_all: "bestätigt alle",
    call_back: "ruft zurück", what: "Was", "site.edit": "geändert", "site.change": "Text ersetzt", "site.restore": "frühere Version wiederhergestellt",
    "site.found": "außerhalb der Seite signiert", "terminal.approve": "Terminal freigegeben", "terminal.revoke": "Terminal gesperrt", forbidden: "Dazu fehlt Ihnen die Berechtigung (nur die Praxisleitung ändert die Anlage).",
    calling: "Ruftasten", "calling-hint": "Eine Ruftaste ruft einen Raum oder mehrere zugleich; die Gerufenen hören einander nicht.",
    "calls-whom": "Ruft", "call-kind": "Art", "new-button": "Neue Ruftaste", "kind-call": "Gespräch", "kind-announcement": "Durchsage (die Räume hören nur zu)",
    "kind-emergency": "Notruf (auch bei „nicht stören“)", groups: "Gruppen", group: "Gruppe", "group-name": "Name der Gruppe",
    "who-calls": "Wer wen anrufen darf", "may-call": "darf anrufen", everyone: "alle", nobody: "niemand",
    "button-new": "Ruftaste „{x}“ kommt hinzu", "button-gone": "Ruftaste „{x}“ entfällt", "button-changed": "Ruftaste „{x}“ ändert sich",
    "group-new": "Gruppe „{x}“ kommt hinzu", "group-gone": "Gruppe „{x}“ entfällt", "group-changed": "Gruppe „{x}“: {r}",
    "may-call-set": "{r} darf anrufen: {x}", "may-call-all": "{r} darf alle anrufen", "pick-room": "Bitte mindestens einen Raum wählen.",
    history: "Verlauf", "history-hint": "Gespräche und Benachrichtigungen aller Terminals, die neuesten zuerst.", with: "Wer → wen", outcome: "Ausgang",
    "history-missing": "Diese Terminals antworteten nicht; ihr Teil kann fehlen: {r}",
    "h-call": "Gespräch", "h-emergency": "Notruf", "h-announcement": "Durchsage", "h-notification": "„{x}“", incoming: "eingehend", outgoing: "ausgehend",
    finished: "geführt", missed: "verpasst", declined: "abgelehnt", not_reached: "nicht erreicht", "h-acknowledged": "bestätigt", "h-acknowledged-by": "bestätigt von {r}",
    seen: "Erreichbar", "seen-now": "jetzt", "seen-at": "zuletzt {t}", "seen-never": "noch nie gesehen", "seen-unknown": "unbekannt",
    "version-behind": "{v} (veraltet)", health: "Betrieb", "health-ok": "in Ordnung", "health-audio-off": "ohne Ton",
    "health-audio-unavailable": "Lautsprecher oder Mikrofon gestört", "health-selftest-failed": "Selbsttest fehlgeschlagen",
    "health-xruns": "{n} Aussetzer", "health-up": "läuft seit {d}",
    "loopback-button": "Lautsprecher prüfen", "loopback-title": "Lautsprecher und Mikrofon in „{r}“",
    "loopback-running": "Ein Prüfton erklingt im Raum …", "loopback-done": "Fertig: der Ton kam nach {ms} ms zurück.",
    "loopback-unheard": "Fertig, aber der Prüfton kam nicht zurück: Lautsprecher oder Mikrofon prüfen.",
    "loopback-aborted": "Abgebrochen.", "loopback-timeout": "Keine Antwort vom Terminal.",
    listen: "Anhören", "listen-failed": "Das lässt sich gerade nicht abspielen: {x}",
    "h-open": "noch nicht bestätigt", "h-delivered": "angekommen bei {r}", "history-empty": "Noch nichts.",
    "for-terminal": "Für", "every-terminal": "alle Terminals", "keys-only": "Tasten", lights: "Lichter", "light-state": "Zustand", led: "Licht",
    pattern: "Anzeige", "assign-light": "Licht belegen", "use-shared": "Wieder wie alle Terminals",
    "scope-site": "Das gilt an jedem Terminal ohne eigene Belegung.", "scope-own": "„{r}“ hat eine eigene Belegung; die aller Terminals gilt dort nicht.",
    "scope-kind": "„{r}“ hat die Belegung seiner Geräteart.", "scope-shared": "„{r}“ hat die Belegung aller Terminals; eine Änderung hier gilt nur an „{r}“.",
    "light-set": "{s}: Licht „{l}“ {p}", "light-gone": "{s} wird nicht mehr angezeigt", "no-lights": "Keine Lichter belegt.",
    "st-fault": "Störung", "st-ringing": "es klingelt", "st-calling": "ruft an", "st-mic_muted": "Mikrofon stumm", "st-in_call": "im Gespräch",
    "st-missed_call": "verpasster Anruf", "st-dnd": "nicht stören", "pt-off": "aus", "pt-steady": "leuchtet", "pt-slow_blink": "blinkt langsam",
    "pt-fast_blink": "blinkt schnell",
  },
  en: {
    live: "Now", "live-hint": "Who can be reached now, and what happens at the terminals.", online: "reachable", offline: "not reachable",
    "in-call": "in a call", dnd: "do not disturb", events: "Events", test: "Send a test", "test-sent": "“{x}” sent to {r}.",
    "ev-delivered": "“{x}” reached {r}", "ev-sent": "“{x}”: {d} of {n} have it", "ev-acknowledged": "“{x}” acknowledged by {r}",
    "ev-presence": "{r} is {s}", "ev-call": "call {r}", "ev-ended": "call ended", "ev-member-up": "connected to the intercom",
    "ev-member-down": "connection to the intercom lost", "ev-lost": "{n} events missed", "no-member": "The intercom cannot be reached from here.",
    title: "Practice intercom", login: "Log in", logout: "Log out", name: "Name", password: "Password",
    terminals: "Terminals", "terminals-hint": "A new terminal says its enrolment code when a key is pressed. Enter it here.",
    room: "Room", terminal: "Terminal", software: "Software", state: "State", pending: "waiting for approval", approved: "approved",
    revoked: "revoked", unknown: "not reached", code: "Enrolment code", approve: "Approve", revoke: "Revoke",
    "approve-what": "The terminal with code {c} is approved for “{r}”.", "revoke-what": "The terminal of “{r}” is revoked; it can never be approved again.",
    overview: "Overview", notifications: "Notifications", keys: "Keys and lights", versions: "Changes",
    version: "Version", rooms: "Rooms", label: "Name", spoken: "Spoken text", recipients: "Recipients",
    tone: "Tone", priority: "Priority", "new-notification": "New notification", "tone-default": "as the priority says",
    "tone-gong": "Gong", "tone-bell": "Bell", "tone-alert": "Alert", "tone-alarm": "Alarm", normal: "normal", urgent: "urgent", emergency: "emergency",
    preview: "Preview", "keys-hint": "These keys work at every terminal.", key: "Key", action: "Does",
    "assign-key": "Assign a key", when: "When", who: "Who", "preview-title": "What changes", apply: "Apply",
    discard: "Discard", undo: "Undo", remove: "Remove", restore: "Restore",
    "wrong-login": "Wrong name or password.", "too-many": "Too many attempts. Please wait a minute.",
    "no-change": "This changes nothing at any terminal.", "in-force": "Version {v} is in force.", "stale": "Someone else changed the site meanwhile. The page now shows their version.",
    took: "took it", already_held: "had it already", unreached: "not reached (takes it from the others once it runs)",
    refused: "refused it", busy: "was busy", other_site: "is not a terminal of this practice",
    added: "new", removed: "gone", "terminal-added": "new terminal", "terminal-removed": "terminal removed",
    "notification-new": "Notification “{x}” is added", "notification-gone": "Notification “{x}” is removed",
    "notification-changed": "Notification “{x}” changes", "key-set": "Key {k}: {a}", "key-gone": "Key {k} does nothing any more",
    "sends": "sends “{x}”", "calls": "calls “{x}”", hang_up: "hangs up", answer: "answers", decline: "declines",
    toggle_dnd: "do not disturb on/off", toggle_mic_mute: "microphone mute on/off", acknowledge: "acknowledges", acknowledge_all: "acknowledges all",
    call_back: "calls back", what: "What", "site.edit": "changed", "site.change": "text replaced", "site.restore": "earlier version restored",
    "site.found": "signed outside the page", "terminal.approve": "terminal approved", "terminal.revoke": "terminal revoked", forbidden: "You may not do this (only the practice manager changes the site).",
    calling: "Call buttons", "calling-hint": "A call button calls one room or several at once; the rooms called do not hear each other.",
    "calls-whom": "Calls", "call-kind": "Kind", "new-button": "New call button", "kind-call": "Call", "kind-announcement": "Announcement (the rooms only listen)",
    "kind-emergency": "Emergency call (even in do not disturb)", groups: "Groups", group: "Group", "group-name": "Name of the group",
    "who-calls": "Who may call whom", "may-call": "may call", everyone: "everyone", nobody: "nobody",
    "button-new": "Call button “{x}” is added", "button-gone": "Call button “{x}” is removed", "button-changed": "Call button “{x}” changes",
    "group-new": "Group “{x}” is added", "group-gone": "Group “{x}” is removed", "group-changed": "Group “{x}”: {r}",
    "may-call-set": "{r} may call: {x}", "may-call-all": "{r} may call everyone", "pick-room": "Please choose at least one room.",
    history: "History", "history-hint": "Calls and notifications of every terminal, newest first.", with: "Who → whom", outcome: "Outcome",
    "history-missing": "These terminals did not answer; their part may be missing: {r}",
    "h-call": "Call", "h-emergency": "Emergency call", "h-announcement": "Announcement", "h-notification": "“{x}”", incoming: "in", outgoing: "out",
    finished: "held", missed: "missed", declined: "declined", not_reached: "not reached", "h-acknowledged": "acknowledged", "h-acknowledged-by": "acknowledged by {r}",
    seen: "Reachable", "seen-now": "now", "seen-at": "last seen {t}", "seen-never": "never seen", "seen-unknown": "unknown",
    "version-behind": "{v} (behind)", health: "Health", "health-ok": "fine", "health-audio-off": "no sound",
    "health-audio-unavailable": "speaker or microphone not working", "health-selftest-failed": "self-test failed",
    "health-xruns": "{n} dropouts", "health-up": "running for {d}",
    "loopback-button": "Test speaker", "loopback-title": "Speaker and microphone in “{r}”",
    "loopback-running": "A test tone sounds in the room …", "loopback-done": "Done: the tone came back after {ms} ms.",
    "loopback-unheard": "Done, but the test tone did not come back: check the speaker and the microphone.",
    "loopback-aborted": "Aborted.", "loopback-timeout": "The terminal does not answer.",
    listen: "Listen", "listen-failed": "This cannot be played now: {x}",
    "h-open": "not yet acknowledged", "h-delivered": "reached {r}", "history-empty": "Nothing yet.",
    "for-terminal": "For", "every-terminal": "every terminal", "keys-only": "Keys", lights: "Lights", "light-state": "State", led: "Light",
    pattern: "Shows", "assign-light": "Assign a light", "use-shared": "Back to every terminal's",
    "scope-site": "This applies at every terminal without its own.", "scope-own": "“{r}” has its own; every terminal's do not apply there.",
    "scope-kind": "“{r}” has those of its kind of terminal.", "scope-shared": "“{r}” has every terminal's; a change here applies at “{r}” alone.",
    "light-set": "{s}: light “{l}” {p}", "light-gone": "{s} is not shown any more", "no-lights": "No lights assigned.",
    "st-fault": "fault", "st-ringing": "ringing", "st-calling": "calling", "st-mic_muted": "microphone muted", "st-in_call": "in a call",
    "st-missed_call": "missed call", "st-dnd": "do not disturb", "pt-off": "off", "pt-steady": "steady", "pt-slow_blink": "blinks slowly",
    "pt-fast_blink": "blinks fast",
  },
};

let lang = localStorage.getItem("lang") || (navigator.language || "de").slice(0, 2);
if (!words[lang]) lang = "de";
let csrf = null;
let site = null;
let pending = null;   // the change previewed: {method, path, body}
let lastVersion = null;

const $ = (id) => document.getElementById(id);
const t = (key, values = {}) => (words[lang][key] || key).replace(/\{(\w+)\}/g, (_, k) => values[k] ?? "");

function translatePage() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
  $("lang").textContent = lang === "de" ? "English" : "Deutsch";
  if (site) render();
  // The terminals' buttons are made in the language of their time: made again.
  for (const row of $("terminal-table").tBodies[0].rows) delete row.dataset.kind;
  if (site && !$("panel-terminals").hidden) loadTerminals().catch(() => {});
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  const response = await fetch("/api/v1/" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) { const e = new Error(data && data.detail || response.statusText); e.status = response.status; e.problem = data; throw e; }
  return data;
}

function show(view) {
  $("login-view").hidden = view !== "login";
  $("site-view").hidden = view !== "site";
  $("logout").hidden = view !== "site";
}

function say(text, bad = false) {
  const m = $("message");
  m.textContent = text;
  m.className = bad ? "message bad" : "message";
  m.hidden = !text;
  if (text) m.scrollIntoView({ block: "start" });
}

function tab(name) {
  for (const b of document.querySelectorAll(".tab")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
  for (const p of ["overview", "live", "calling", "notifications", "keys", "terminals", "history", "versions"]) $("panel-" + p).hidden = p !== name;
  if (name === "live") startLive();
  if (name === "versions") loadVersions();
  if (name === "terminals") loadTerminals();
  if (name === "history") loadHistory();
}

function cell(row, text) { const td = row.insertCell(); td.textContent = text; return td; }
function roomName(id) { const r = site.rooms.find((r) => r.id === id); return r ? r.name : id; }
function buttonLabel(id) { const b = site.buttons.find((b) => b.id === id); return b ? b.label || id : id; }
// A group stands for its rooms; its name is shown as it is.
function targetNames(ids) { return ids.map((r) => site.groups[r] ? r : roomName(r)).join(", "); }
// A TOML array as the plan shows it ("[\"a\", \"b\"]") → its strings.
function tomlStrings(v) { return [...(v || "").matchAll(/"([^"]*)"/g)].map((x) => x[1]); }
function checkboxes(name, items, checked = []) {
  return items.map(([value, text]) => {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox"; box.value = value; box.name = name; box.checked = checked.includes(value);
    label.append(box, " " + text);
    return label;
  });
}
function checked(name) { return [...document.querySelectorAll(`input[name=${name}]:checked`)].map((b) => b.value); }
function typeLabel(id) { const n = site.notifications.find((n) => n.id === id); return n ? n.label : id; }

function describeAction(action) {
  const [verb, arg] = action.split(":");
  if (verb === "notify") return t("sends", { x: typeLabel(arg) });
  if (verb === "call") { const b = site.buttons.find((b) => b.id === arg); return t("calls", { x: b && b.label || (b ? b.rooms.map(roomName).join(", ") : arg) }); }
  return t(action);
}

function keyName(key) { return key.replace(/^KEY_/, ""); }

function render() {
  $("site-name").textContent = site.name || site.site;
  $("site-version").textContent = site.version;
  $("room-list").replaceChildren(...site.rooms.map((r) => { const li = document.createElement("li"); li.textContent = r.name; return li; }));

  const body = $("notification-table").tBodies[0];
  body.replaceChildren();
  for (const n of site.notifications) {
    const row = body.insertRow();
    cell(row, n.label); cell(row, n.text || n.label); cell(row, n.recipients.map((r) => site.groups[r] ? r : roomName(r)).join(", "));
    cell(row, n.tone ? t("tone-" + n.tone) : t("tone-default")); cell(row, t(n.priority));
    const test = document.createElement("button");
    test.className = "quiet small staff-only"; test.textContent = t("test"); test.id = "test-" + n.id;
    test.onclick = () => sendTest(n);
    const hear = document.createElement("button");
    hear.className = "quiet small staff-only"; hear.textContent = t("listen"); hear.id = "listen-" + n.id;
    hear.onclick = () => listen({ label: n.label, text: n.text, tone: n.tone || undefined, priority: n.priority });
    const remove = document.createElement("button");
    remove.className = "quiet small manager-only"; remove.textContent = t("remove");
    remove.onclick = () => preview("PATCH", "site", { version: site.version, edits: [{ path: ["notifications", n.id] }] });
    row.insertCell().append(hear, " ", test, " ", remove);
  }
  $("n-recipients").replaceChildren(...site.rooms.map((r) => {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox"; box.value = r.id; box.name = "recipient";
    label.append(box, " " + r.name);
    return label;
  }));

  renderCalling();

  renderKeysAndLights();
}

// Keys and lights, for every terminal or one room's. A room's own map replaces the shared one
// whole, so a room's first change copies what it runs by and changes that.
const lightStates = ["fault", "ringing", "calling", "mic_muted", "in_call", "missed_call", "dnd"];
const lightPatterns = ["steady", "slow_blink", "fast_blink", "off"];
function scoped(kind) {
  const room = site.rooms.find((r) => r.id === $("k-scope").value);
  if (!room) return { map: site[kind], from: "site", path: [kind, "map"], room: null };
  return { map: room[kind], from: room[kind + "_from"], path: ["terminals", room.id, kind, "map"], room };
}
function mapEdits(kind, name, value) {   // value undefined: remove
  const s = scoped(kind);
  if (!s.room || s.from === "terminal") return [{ path: [...s.path, name], value }];
  const map = { ...s.map };
  if (value === undefined) delete map[name]; else map[name] = value;
  return [{ path: s.path, value: map }];
}
function scopeHint(kind) {
  const s = scoped(kind);
  $(kind === "keys" ? "k-reset" : "l-reset").hidden = !(s.room && s.from === "terminal");
  if (!s.room) return t("scope-site");
  return t(s.from === "terminal" ? "scope-own" : s.from === "kind" ? "scope-kind" : "scope-shared", { r: s.room.name });
}
function removeButton(onclick) {
  const b = document.createElement("button");
  b.className = "quiet small manager-only"; b.textContent = t("remove"); b.onclick = onclick;
  return b;
}
function renderKeysAndLights() {
  const scope = $("k-scope"), chosen = scope.value;
  scope.replaceChildren(new Option(t("every-terminal"), ""), ...site.rooms.map((r) => new Option(r.name, r.id)));
  scope.value = site.rooms.some((r) => r.id === chosen) ? chosen : "";
  const keys = $("key-table").tBodies[0];
  keys.replaceChildren();
  $("k-hint").textContent = scopeHint("keys");
  for (const [key, action] of Object.entries(scoped("keys").map).sort()) {
    const row = keys.insertRow();
    cell(row, keyName(key)); cell(row, describeAction(action));
    row.insertCell().append(removeButton(() => preview("PATCH", "site", { version: site.version, edits: mapEdits("keys", key) })));
  }
  const keySelect = $("k-key");
  keySelect.replaceChildren(...["KEY_1", "KEY_2", "KEY_3", "KEY_4", "KEY_F1", "KEY_F2", "KEY_F3", "KEY_F4"].map((k) => new Option(keyName(k), k)));
  const actions = [...site.notifications.map((n) => "notify:" + n.id), ...site.buttons.map((b) => "call:" + b.id),
    "hang_up", "answer", "toggle_dnd", "toggle_mic_mute", "acknowledge_all"];
  $("k-action").replaceChildren(...actions.map((a) => new Option(describeAction(a), a)));

  const lights = $("light-table").tBodies[0];
  lights.replaceChildren();
  $("l-hint").textContent = scopeHint("lights");
  const shown = Object.entries(scoped("lights").map).sort((a, b) => lightStates.indexOf(a[0]) - lightStates.indexOf(b[0]));
  for (const [state, light] of shown) {
    const row = lights.insertRow();
    row.id = "light-" + state;
    cell(row, t("st-" + state)); cell(row, light.led); cell(row, t("pt-" + light.pattern));
    row.insertCell().append(removeButton(() => preview("PATCH", "site", { version: site.version, edits: mapEdits("lights", state) })));
  }
  if (shown.length === 0) cell(lights.insertRow(), t("no-lights")).colSpan = 4;
  $("l-state").replaceChildren(...lightStates.map((s) => new Option(t("st-" + s), s)));
  $("l-pattern").replaceChildren(...lightPatterns.map((p) => new Option(t("pt-" + p), p)));
  const leds = new Set([site.lights, ...site.rooms.map((r) => r.lights)].flatMap((m) => Object.values(m).map((l) => l.led)));
  $("l-leds").replaceChildren(...[...leds].sort().map((l) => new Option(l, l)));
}

// Call buttons, groups, and who may call whom (rooms.<id>.may_call: once any room has a list,
// a room without one calls nobody).
function renderCalling() {
  const buttons = $("button-table").tBodies[0];
  buttons.replaceChildren();
  for (const b of site.buttons) {
    const row = buttons.insertRow();
    row.id = "button-" + b.id;
    cell(row, b.label || b.id); cell(row, targetNames(b.rooms)); cell(row, t("kind-" + b.kind));
    const remove = document.createElement("button");
    remove.className = "quiet small manager-only"; remove.textContent = t("remove");
    remove.onclick = () => preview("PATCH", "site", { version: site.version, edits: [{ path: ["buttons", b.id] }] });
    row.insertCell().append(remove);
  }
  const targets = [...site.rooms.map((r) => [r.id, r.name]), ...Object.keys(site.groups).sort().map((g) => [g, g])];
  $("b-rooms").replaceChildren(...checkboxes("b-room", targets));

  const groups = $("group-table").tBodies[0];
  groups.replaceChildren();
  for (const [name, members] of Object.entries(site.groups).sort()) {
    const row = groups.insertRow();
    row.id = "group-" + name;
    cell(row, name); cell(row, members.map(roomName).join(", "));
    const remove = document.createElement("button");
    remove.className = "quiet small manager-only"; remove.textContent = t("remove");
    remove.onclick = () => preview("PATCH", "site", { version: site.version, edits: [{ path: ["groups", name] }] });
    row.insertCell().append(remove);
  }
  $("g-rooms").replaceChildren(...checkboxes("g-room", site.rooms.map((r) => [r.id, r.name])));

  const anyList = site.rooms.some((r) => r.may_call);
  const permissions = $("permission-table").tBodies[0];
  permissions.replaceChildren();
  for (const r of site.rooms) {
    const row = permissions.insertRow();
    row.id = "may-call-" + r.id;
    cell(row, r.name);
    cell(row, r.may_call ? (r.may_call.length ? r.may_call.map(roomName).join(", ") : t("nobody")) : t(anyList ? "nobody" : "everyone"));
  }
  const select = $("p-room");
  const chosen = select.value;
  select.replaceChildren(...site.rooms.map((r) => new Option(r.name, r.id)));
  if (site.rooms.some((r) => r.id === chosen)) select.value = chosen;
  permissionChoices();
}

// The rooms the chosen room may call now, ticked.
function permissionChoices() {
  const room = site.rooms.find((r) => r.id === $("p-room").value);
  if (!room) return;
  const others = site.rooms.filter((r) => r.id !== room.id);
  const anyList = site.rooms.some((r) => r.may_call);
  const now = room.may_call || (anyList ? [] : others.map((r) => r.id));
  $("p-rooms").replaceChildren(...checkboxes("p-callee", others.map((r) => [r.id, r.name]), now));
}

function slug(text, fallback) {
  return text.toLowerCase().replace(/ä/g, "ae").replace(/ö/g, "oe").replace(/ü/g, "ue").replace(/ß/g, "ss")
    .normalize("NFD").replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 28) || fallback;
}
function freeID(base, taken) { let id = base, n = 2; while (taken(id)) id = base + "-" + n++; return id; }

// The whole site's history: every terminal's own, made one by the service (each call and
// notification once, from the side that placed it), newest first.
async function loadHistory() {
  const body = $("history-table").tBodies[0];
  try {
    const h = await api("GET", "history/site?limit=50");
    const rows = [
      ...h.calls.map(({ entry: c }) => ({ at: c.started, what: t(c.kind ? "h-" + c.kind : "h-call"),
        with: roomName(c.caller) + " → " + (c.direction === "incoming" ? roomName(c.participants.length ? c.participants[0].room : "") : c.participants.map((p) => roomName(p.room)).join(", ")),
        outcome: t(c.outcome), id: c.call_id })),
      ...h.notifications.map(({ record: n }) => ({ at: n.sent, what: t("h-notification", { x: n.label || typeLabel(n.type) }),
        with: roomName(n.sender) + " → " + n.recipients.map(roomName).join(", "),
        outcome: n.direction === "incoming" ? t(n.acknowledged ? "h-acknowledged" : "h-open")
          : (n.acknowledged_by && n.acknowledged_by.length ? t("h-acknowledged-by", { r: n.acknowledged_by.map(roomName).join(", ") })
            : (n.delivered && n.delivered.length ? t("h-delivered", { r: n.delivered.map(roomName).join(", ") }) : t("h-open"))),
        id: n.notification_id })),
    ].sort((a, b) => b.at - a.at);
    body.replaceChildren();
    for (const r of rows) {
      const row = body.insertRow();
      row.id = "history-" + r.id;
      cell(row, new Date(r.at * 1000).toLocaleString(lang)); cell(row, r.what); cell(row, r.with); cell(row, r.outcome);
    }
    if (rows.length === 0) cell(body.insertRow(), t("history-empty")).colSpan = 4;
    $("history-missing").textContent = h.unanswered.length ? t("history-missing", { r: h.unanswered.map((u) => roomName(u.room)).join(", ") }) : "";
    $("history-missing").hidden = h.unanswered.length === 0;
  } catch (e) { body.replaceChildren(); say(e.message || String(e), true); }
}

async function load() {
  site = await api("GET", "site");
  render();
  // For the measurement suite: when the site first showed (performance timeline, no network).
  if (performance.getEntriesByName("site-shown").length === 0) performance.mark("site-shown");
}

function newID(label) { return freeID(slug(label, "benachrichtigung"), (id) => site.notifications.some((x) => x.id === id)); }

// What a plan changes at one terminal, in words.
function describeTerminal(change) {
  const items = [];
  const byType = {}, byButton = {};
  for (const s of change.settings) {
    const m = s.key.match(/^notifications\.([^.]+)\.(.+)$/);
    if (m) { (byType[m[1]] = byType[m[1]] || []).push(s); continue; }
    const b = s.key.match(/^buttons\.([^.]+)\.(.+)$/);
    if (b) { (byButton[b[1]] = byButton[b[1]] || []).push(s); continue; }
    const g = s.key.match(/^groups\.(.+)$/);
    if (g) {
      if (s.before === undefined) items.push([t("group-new", { x: g[1] }), "added"]);
      else if (s.after === undefined) items.push([t("group-gone", { x: g[1] }), "removed"]);
      else items.push([t("group-changed", { x: g[1], r: tomlStrings(s.after).map(roomName).join(", ") }), ""]);
      continue;
    }
    const p = s.key.match(/^rooms\.([^.]+)\.may_call$/);
    if (p) {
      const list = tomlStrings(s.after);
      items.push([s.after === undefined ? t("may-call-all", { r: roomName(p[1]) })
        : t("may-call-set", { r: roomName(p[1]), x: list.length ? list.map(roomName).join(", ") : t("nobody") }), ""]);
      continue;
    }
    if (s.key === "lights.map") {
      const parse = (v) => Object.fromEntries([...(v || "").matchAll(/([a-z_]+) = \{ led = "([^"]*)", pattern = "([^"]*)" \}/g)].map((x) => [x[1], x[2] + " " + x[3]]));
      const before = parse(s.before), after = parse(s.after);
      for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
        if (before[k] === after[k]) continue;
        const [led, pattern] = (after[k] || "").split(" ");
        items.push(after[k] ? [t("light-set", { s: t("st-" + k), l: led, p: t("pt-" + pattern) }), "added"] : [t("light-gone", { s: t("st-" + k) }), "removed"]);
      }
      continue;
    }
    if (s.key === "keys.map") {
      const parse = (v) => Object.fromEntries([...(v || "").matchAll(/([A-Za-z0-9_]+) = "([^"]*)"/g)].map((x) => [x[1], x[2]]));
      const before = parse(s.before), after = parse(s.after);
      for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
        if (before[k] === after[k]) continue;
        items.push(after[k] ? [t("key-set", { k: keyName(k), a: describeAction(after[k]) }), "added"] : [t("key-gone", { k: keyName(k) }), "removed"]);
      }
      continue;
    }
    items.push([`${s.key}: ${s.before ?? "–"} → ${s.after ?? "–"}`, ""]);
  }
  for (const [id, settings] of Object.entries(byButton)) {
    const label = (settings.find((s) => s.key.endsWith(".label")) || {}).after?.replace(/^"|"$/g, "") || buttonLabel(id);
    if (settings.every((s) => s.before === undefined)) items.push([t("button-new", { x: label }), "added"]);
    else if (settings.every((s) => s.after === undefined)) items.push([t("button-gone", { x: buttonLabel(id) }), "removed"]);
    else items.push([t("button-changed", { x: label }), ""]);
  }
  for (const [id, settings] of Object.entries(byType)) {
    const label = (settings.find((s) => s.key.endsWith(".label")) || {}).after?.replace(/^"|"$/g, "") || typeLabel(id);
    if (settings.every((s) => s.before === undefined)) items.push([t("notification-new", { x: label }), "added"]);
    else if (settings.every((s) => s.after === undefined)) items.push([t("notification-gone", { x: typeLabel(id) }), "removed"]);
    else items.push([t("notification-changed", { x: label }), ""]);
  }
  return items;
}

async function preview(method, path, body) {
  say("");
  $("result").hidden = true;
  try {
    const outcome = await api(method, path + (path.includes("?") ? "&" : "?") + "dry_run=true", body);
    pending = { method, path, body };
    const list = $("preview-list");
    list.replaceChildren();
    if (outcome.plan.terminals.length === 0) list.textContent = t("no-change");
    for (const change of outcome.plan.terminals) {
      const div = document.createElement("div");
      div.className = "terminal";
      const h = document.createElement("h3");
      h.textContent = roomName(change.room) + (change.kind === "changed" ? "" : " – " + t("terminal-" + change.kind));
      const ul = document.createElement("ul");
      for (const [text, kind] of describeTerminal(change)) { const li = document.createElement("li"); li.textContent = text; li.className = kind; ul.append(li); }
      div.append(h, ul);
      list.append(div);
    }
    $("preview").hidden = false;
    $("apply").disabled = outcome.plan.terminals.length === 0;
    $("preview").scrollIntoView({ block: "start" });
  } catch (e) { await refused(e); }
}

async function apply() {
  if (!pending) return;
  try {
    const before = site.version;
    const outcome = await api(pending.method, pending.path, pending.body);
    // A terminal's approval or revocation is not undone by an earlier text (a revoked key stays revoked).
    lastVersion = pending.path.startsWith("terminals/") ? null : before;
    $("undo").hidden = lastVersion === null;
    pending = null;
    $("preview").hidden = true;
    for (const form of document.forms) if (form.id !== "login-form") form.reset();
    for (const room of Object.keys(typedCodes)) delete typedCodes[room];
    $("result-title").textContent = t("in-force", { v: outcome.plan.version });
    $("result-list").replaceChildren(...outcome.published.map((p) => {
      const li = document.createElement("li");
      li.textContent = `${roomName(p.room)}: ${t(p.result)}`;
      li.className = p.result;
      return li;
    }));
    $("result").hidden = false;
    await load();
    if (!$("panel-versions").hidden) await loadVersions();
    if (!$("panel-terminals").hidden) await loadTerminals();
    $("result").scrollIntoView({ block: "start" });
  } catch (e) { await refused(e); }
}

async function refused(e) {
  if (e.status === 409) { say(t("stale"), true); $("preview").hidden = true; await load(); return; }
  if (e.status === 403) { say(t("forbidden"), true); return; }
  const details = e.problem && e.problem.errors ? " " + e.problem.errors.map((x) => x.problem).join("; ") : "";
  say((e.message || String(e)) + details, true);
}

// A change with nothing to plan (an approval, a revocation): said in words, applied on "apply".
function confirmChange(text, method, path, body) {
  say("");
  $("result").hidden = true;
  pending = { method, path, body };
  $("preview-list").textContent = text;
  $("apply").disabled = false;
  $("preview").hidden = false;
  $("preview").scrollIntoView({ block: "start" });
}

// The table stays live while it is shown (refreshed every few seconds): rows are updated in place
// and a row's buttons rebuilt only when its state changes, so a code being typed is kept.
async function loadTerminals() {
  const list = await api("GET", "terminals");
  const body = $("terminal-table").tBodies[0];
  const rooms = list.items.map((term) => "terminal-" + term.room);
  if ([...body.rows].map((r) => r.id).join() !== rooms.join()) {
    body.replaceChildren();
    for (const id of rooms) { const row = body.insertRow(); row.id = id; for (let i = 0; i < 8; i++) row.insertCell(); }
  }
  list.items.forEach((term, i) => {
    const c = body.rows[i].cells;
    c[0].textContent = roomName(term.room); c[1].textContent = term.identity || "–"; c[2].textContent = term.software || "–";
    c[3].textContent = term.online === undefined ? t("seen-unknown") : term.online ? t("seen-now")
      : term.last_seen ? t("seen-at", { t: new Date(term.last_seen * 1000).toLocaleString(lang) }) : t("seen-never");
    c[3].className = term.online ? "took seen" : "unreached seen";
    c[4].textContent = term.site_version === undefined ? "–" : term.behind ? t("version-behind", { v: term.site_version }) : String(term.site_version);
    c[4].className = "site-version";
    showHealth(c[5], term.health);
    c[6].textContent = t(term.reached ? term.standing : "unknown"); c[6].className = "state";
    const kind = term.reached && term.standing === "pending" ? "pending" : term.approved ? "approved" : "none";
    if (body.rows[i].dataset.kind !== kind) { body.rows[i].dataset.kind = kind; terminalActions(c[7], term, kind); }
  });
}

// What a terminal's newest health message said, in words: its faults, or that it is fine; the
// dropouts since it started, and (on hover) how long it has run.
function showHealth(td, h) {
  if (!h) { td.textContent = "–"; td.className = "health"; td.title = ""; return; }
  const words = [];
  if (h.audio === "unavailable") words.push(t("health-audio-unavailable"));
  if (h.self_test === "failed") words.push(t("health-selftest-failed"));
  if (words.length === 0) words.push(t(h.audio === "off" ? "health-audio-off" : "health-ok"));
  if (h.xruns > 0) words.push(t("health-xruns", { n: h.xruns }));
  td.textContent = words.join(", ");
  td.className = h.audio === "unavailable" || h.self_test === "failed" ? "health unreached" : "health took";
  const hours = Math.floor(h.uptime_seconds / 3600), minutes = Math.floor((h.uptime_seconds % 3600) / 60);
  td.title = t("health-up", { d: hours > 0 ? `${hours} h ${minutes} min` : `${minutes} min` });
}

function terminalActions(td, term, kind) {
  td.replaceChildren();
  if (kind === "pending") {
    const code = document.createElement("input");
    code.id = "code-" + term.room; code.placeholder = t("code"); code.size = 16; code.className = "manager-only";
    // A terminal that missed one refresh and is back gets its input back as it was typed.
    code.value = typedCodes[term.room] || "";
    code.oninput = () => { typedCodes[term.room] = code.value; };
    const b = document.createElement("button");
    b.id = "approve-" + term.room; b.className = "small manager-only"; b.textContent = t("approve");
    b.onclick = () => confirmChange(t("approve-what", { c: code.value, r: roomName(term.room) }), "POST",
      `terminals/${encodeURIComponent(term.room)}/approve`, { code: code.value });
    td.append(code, " ", b);
  } else if (kind === "approved") {
    const b = document.createElement("button");
    b.id = "revoke-" + term.room; b.className = "quiet small manager-only"; b.textContent = t("revoke");
    b.onclick = () => confirmChange(t("revoke-what", { r: roomName(term.room) }), "POST", `terminals/${encodeURIComponent(term.room)}/revoke`);
    const test = document.createElement("button");
    test.id = "loopback-" + term.room; test.className = "quiet small staff-only"; test.textContent = t("loopback-button");
    test.onclick = () => runLoopback(term.room);
    td.append(b, " ", test);
  }
}

// The terminal's own device loopback test, run from here: a chirp from its speaker, heard by its
// microphone. Started, then asked every second until done; the plot comes as an image.
async function runLoopback(room) {
  const path = `terminals/${encodeURIComponent(room)}/loopback`;
  $("loopback").hidden = false;
  $("loopback-title").textContent = t("loopback-title", { r: roomName(room) });
  $("loopback-report").hidden = true; $("loopback-plot").hidden = true;
  $("loopback-state").textContent = t("loopback-running"); $("loopback-state").className = "";
  $("loopback").scrollIntoView({ block: "start" });
  try {
    let answer = await api("POST", path);
    for (let i = 0; i < 30 && answer.status.state === "running"; i++) {
      await new Promise((done) => setTimeout(done, 1000));
      answer = await api("GET", path);
    }
    const s = answer.status;
    if (s.state === "running") { $("loopback-state").textContent = t("loopback-timeout"); $("loopback-state").className = "unreached"; return; }
    if (s.state !== "done") { $("loopback-state").textContent = t("loopback-aborted"); $("loopback-state").className = "unreached"; return; }
    const heard = typeof s.round_trip_ms === "number";
    $("loopback-state").textContent = heard ? t("loopback-done", { ms: s.round_trip_ms.toFixed(1) }) : t("loopback-unheard");
    $("loopback-state").className = heard ? "took" : "unreached";
    $("loopback-report").textContent = answer.report || ""; $("loopback-report").hidden = !answer.report;
    $("loopback-plot").src = "/api/v1/" + path + "/plot?at=" + Date.now(); $("loopback-plot").hidden = false;
  } catch (e) {
    $("loopback-state").textContent = e.message || String(e); $("loopback-state").className = "unreached";
  }
}

const typedCodes = {};
let terminalsRefreshing = false;
setInterval(async () => {
  if (terminalsRefreshing || $("site-view").hidden || $("panel-terminals").hidden) return;
  terminalsRefreshing = true;
  try { await loadTerminals(); } catch (e) { /* the next tick tries again; a lost session shows at the next action */ }
  terminalsRefreshing = false;
}, 5000);

async function loadVersions() {
  const list = await api("GET", "site/versions?limit=50");
  const body = $("version-table").tBodies[0];
  body.replaceChildren();
  for (const v of list.items) {
    const row = body.insertRow();
    cell(row, v.version); cell(row, new Date(v.at * 1000).toLocaleString(lang)); cell(row, t(v.action));
    cell(row, v.action === "site.found" ? "" : v.actor);
    const td = row.insertCell();
    if (v.version !== site.version) {
      const b = document.createElement("button");
      b.className = "quiet small manager-only"; b.textContent = t("restore");
      b.onclick = () => preview("POST", `site/versions/${v.version}/restore`);
      td.append(b);
    }
  }
}

// A type's tone and text as a terminal sounds them (the service renders them with the site's
// tones and voice), played here. `heard` is the last one, for the browser test.
let heard = null;
async function listen(value) {
  try {
    const response = await fetch("/api/v1/notifications/preview", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: JSON.stringify(value) });
    if (!response.ok) { const p = await response.json().catch(() => null); throw new Error(p && p.detail || response.statusText); }
    if (heard) { heard.pause(); URL.revokeObjectURL(heard.src); }
    heard = new Audio(URL.createObjectURL(await response.blob()));
    await heard.play();
  } catch (e) { say(t("listen-failed", { x: e.message || String(e) }), true); }
}

// The live board: presence, then what the event stream says, in words (the newest first).
let events = null;
const sentTypes = {};   // notification id → type, for the words of later events

async function sendTest(n) {
  try {
    const sent = await api("POST", "notifications", { type: n.id });
    sentTypes[sent.notification_id] = n.id;
    // Its events may have come before this answer: their words again, now with its name.
    for (const li of $("event-list").children) if (li.event && li.event.notification_id === sent.notification_id) describeItem(li);
    say(t("test-sent", { x: n.label, r: sent.to.map(roomName).join(", ") }));
  } catch (e) { say(e.status === 503 ? t("no-member") : (e.message || String(e)), true); }
}

function presenceWords(p) {
  if (!p.online) return t("offline");
  return [t("online"), p.in_call ? t("in-call") : null, p.do_not_disturb ? t("dnd") : null].filter(Boolean).join(", ");
}

async function loadPresence() {
  try {
    const d = await api("GET", "presence");
    const body = $("presence-table").tBodies[0];
    body.replaceChildren();
    for (const r of d.rooms) {
      const row = body.insertRow();
      row.id = "presence-" + r.id;
      cell(row, r.name); cell(row, presenceWords(r)).className = r.online ? "took" : "unreached";
    }
  } catch (e) { $("presence-table").tBodies[0].replaceChildren(); say(e.status === 503 ? t("no-member") : e.message, true); }
}

function describeEvent(e) {
  const x = typeLabel(sentTypes[e.notification_id] || "") || t("notifications");
  switch (e.event) {
    case "notification_delivered": return t("ev-delivered", { x, r: roomName(e.room) });
    case "notification_sent": return t("ev-sent", { x, d: e.delivered.length, n: e.delivered.length + e.waiting.length });
    case "notification_acknowledged": return t("ev-acknowledged", { x, r: roomName(e.by) });
    case "presence_changed": return t("ev-presence", { r: roomName(e.room), s: presenceWords(e) });
    case "incoming_call": return t("ev-call", { r: roomName(e.from) });
    case "outgoing_call": return t("ev-call", { r: e.to.map(roomName).join(", ") });
    case "call_ended": return t("ev-ended");
    case "member": return t(e.connected ? "ev-member-up" : "ev-member-down");
    case "events_lost": return t("ev-lost", { n: e.count });
    default: return e.event;
  }
}

function describeItem(li) { li.textContent = li.at.toLocaleTimeString(lang) + " – " + describeEvent(li.event); }

function startLive() {
  loadPresence();
  if (events) return;
  events = new EventSource("/api/v1/events");
  const shown = (m) => {
    const e = JSON.parse(m.data);
    const li = document.createElement("li");
    li.className = "event"; li.dataset.event = e.event; li.event = e; li.at = new Date();
    describeItem(li);
    if (e.event === "presence_changed") loadPresence();
    const list = $("event-list");
    list.prepend(li);
    while (list.children.length > 50) list.lastChild.remove();
  };
  for (const name of ["notification_delivered", "notification_sent", "notification_acknowledged", "presence_changed",
    "incoming_call", "outgoing_call", "call_ended", "member", "events_lost"]) events.addEventListener(name, shown);
}

async function start() {
  translatePage();
  try {
    const me = await api("GET", "session");
    csrf = me.csrf_token;
    $("who").textContent = me.name;
    document.body.classList.toggle("readonly", me.role !== "manager");
    document.body.classList.toggle("viewer", me.role === "viewer");
    show("site");
    tab("overview");
    await load();
  } catch (e) { show("login"); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("lang").onclick = () => { lang = lang === "de" ? "en" : "de"; localStorage.setItem("lang", lang); translatePage(); };
  for (const b of document.querySelectorAll(".tab")) b.onclick = () => tab(b.dataset.tab);
  $("login-form").onsubmit = async (event) => {
    event.preventDefault();
    $("login-error").textContent = "";
    try {
      const me = await api("POST", "session", { name: $("login-name").value, password: $("login-password").value });
      csrf = me.csrf_token;
      $("login-password").value = "";
      await start();
    } catch (e) { $("login-error").textContent = e.status === 429 ? t("too-many") : t("wrong-login"); }
  };
  $("logout").onclick = async () => {
    try { await api("DELETE", "session"); } catch (e) {}
    csrf = null; site = null; pending = null; lastVersion = null;
    if (events) { events.close(); events = null; }
    $("event-list").replaceChildren();
    for (const form of document.forms) form.reset();
    for (const id of ["preview", "result", "message"]) $(id).hidden = true;
    show("login");
  };
  $("notification-form").onsubmit = (event) => {
    event.preventDefault();
    const label = $("n-label").value.trim();
    const recipients = [...document.querySelectorAll("input[name=recipient]:checked")].map((b) => b.value);
    const value = { label, recipients, tone: $("n-tone").value, priority: $("n-priority").value };
    if ($("n-text").value.trim()) value.text = $("n-text").value.trim();
    preview("PATCH", "site", { version: site.version, edits: [{ path: ["notifications", newID(label)], value }] });
  };
  $("n-listen").onclick = () => {
    const label = $("n-label").value.trim() || "…";
    listen({ label, text: $("n-text").value.trim(), tone: $("n-tone").value || undefined, priority: $("n-priority").value });
  };
  $("button-form").onsubmit = (event) => {
    event.preventDefault();
    const label = $("b-label").value.trim();
    const rooms = checked("b-room");
    if (rooms.length === 0) { say(t("pick-room"), true); return; }
    const id = freeID(slug(label, "ruf"), (x) => site.buttons.some((b) => b.id === x));
    preview("PATCH", "site", { version: site.version, edits: [{ path: ["buttons", id], value: { label, rooms, kind: $("b-kind").value } }] });
  };
  $("group-form").onsubmit = (event) => {
    event.preventDefault();
    const rooms = checked("g-room");
    if (rooms.length === 0) { say(t("pick-room"), true); return; }
    const name = freeID(slug($("g-name").value.trim(), "gruppe"), (x) => x in site.groups || site.rooms.some((r) => r.id === x));
    preview("PATCH", "site", { version: site.version, edits: [{ path: ["groups", name], value: rooms }] });
  };
  $("p-room").onchange = permissionChoices;
  $("permission-form").onsubmit = (event) => {
    event.preventDefault();
    const room = $("p-room").value;
    const edits = [{ path: ["rooms", room, "may_call"], value: checked("p-callee") }];
    // The first list would leave every other room calling nobody: they keep calling everyone.
    if (!site.rooms.some((r) => r.may_call)) {
      for (const r of site.rooms) if (r.id !== room) edits.push({ path: ["rooms", r.id, "may_call"], value: site.rooms.filter((x) => x.id !== r.id).map((x) => x.id) });
    }
    preview("PATCH", "site", { version: site.version, edits });
  };
  $("key-form").onsubmit = (event) => {
    event.preventDefault();
    preview("PATCH", "site", { version: site.version, edits: mapEdits("keys", $("k-key").value, $("k-action").value) });
  };
  $("light-form").onsubmit = (event) => {
    event.preventDefault();
    preview("PATCH", "site", { version: site.version, edits: mapEdits("lights", $("l-state").value, { led: $("l-led").value.trim(), pattern: $("l-pattern").value }) });
  };
  $("k-scope").onchange = renderKeysAndLights;
  for (const [button, kind] of [["k-reset", "keys"], ["l-reset", "lights"]]) {
    $(button).onclick = () => preview("PATCH", "site", { version: site.version, edits: [{ path: scoped(kind).path }] });
  }
  $("apply").onclick = apply;
  $("discard").onclick = () => { pending = null; $("preview").hidden = true; };
  $("undo").onclick = () => { if (lastVersion) preview("POST", `site/versions/${lastVersion}/restore`); };
  start();
});
