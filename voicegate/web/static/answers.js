// What "Teach my answers" says: the answers one may teach, their names, and the takes taught
// so far grouped by answer. Pure functions of the server's JSON (GET /device/enrol), so a test
// can check them without a server.

// The meanings the server stores, by the name the page shows for each.
const NAMES = {
  confirm: "Yes",
  cancel: "No",
  more_time: "Wait",
  "choose:1": "One",
  "choose:2": "Two",
  "choose:3": "Three",
  "choose:4": "Four",
  "choose:5": "Five",
};

export function meaningName(meaning) {
  return NAMES[meaning] || meaning;
}

// "Yes", or "Yes “haan”" when the user named their own word for it.
export function answerName(meaning, label) {
  return label ? `${meaningName(meaning)} “${label}”` : meaningName(meaning);
}

export function cleanLabel(text) {
  return (text || "").trim().replace(/\s+/g, " ");
}

// One entry per answer taught (a meaning and the user's word for it), in the order of the
// server's ``meanings`` and then by word; each with its takes, oldest first. ``places`` maps a
// take recorded again to the time of the take it replaced, so it keeps its number.
export function groups(data, places = new Map()) {
  const order = data.meanings || Object.keys(NAMES);
  const when = (take) => places.get(take.id) ?? take.created_at;
  const byKey = new Map();
  for (const take of [...data.templates].sort((a, b) => when(a) - when(b))) {
    const key = `${take.meaning}\n${take.label}`;
    if (!byKey.has(key)) byKey.set(key, { meaning: take.meaning, label: take.label, takes: [] });
    byKey.get(key).takes.push(take);
  }
  return [...byKey.values()].sort((a, b) =>
    order.indexOf(a.meaning) - order.indexOf(b.meaning) || a.label.localeCompare(b.label));
}

export function takesOf(data, meaning, label, places = new Map()) {
  const found = groups(data, places).find((g) => g.meaning === meaning && g.label === label);
  return found ? found.takes : [];
}

export function takeCount(n) {
  return `${n} take${n === 1 ? "" : "s"}`;
}

// The heading over the takes of the answer being taught.
export function progressTitle(name, done, wanted) {
  return done >= wanted
    ? `${name}: taught, ${takeCount(done)}`
    : `${name}: take ${done + 1} of ${wanted}`;
}

// The line the status region reads after a take was saved.
export function savedLine(name, done, wanted, redone) {
  const what = redone
    ? `Take ${redone} of ${name} recorded again.`
    : `Take ${done} of ${wanted} saved for ${name}.`;
  if (done >= wanted) {
    return `${what} ${name} is taught. Pick another answer, or play, redo or delete a take.`;
  }
  return `${what} Now take ${done + 1} of ${wanted}: press Record and say it again.`;
}

// What the taught answers still need before they count in a decision, or "" when they count:
// the server compares an answer with the user's takes only where two or more answers are
// taught (one alone has nothing to be told apart from), and an answer with one take has no
// spread of the user's own to judge a match by (docs/voice.md, "Fusion with the recogniser").
export function countsNote(data) {
  const takes = new Map();
  for (const take of data.templates || []) {
    if (take.current === false) continue;
    takes.set(take.meaning, (takes.get(take.meaning) || 0) + 1);
  }
  if (takes.size === 0) return "";
  if (takes.size === 1) {
    return "Taught answers count once two different answers are taught: teach one more.";
  }
  const single = [...takes].filter(([, n]) => n < 2).map(([meaning]) => meaningName(meaning));
  if (single.length === 0) return "";
  const which = single.length === 1 ? `${single[0]} has` : `${single.join(", ")} each have`;
  return `${which} one take; an answer counts from its second take.`;
}

// After a take is saved: "" when it sounds like the answer it was taught as (or like none),
// else a warning that names what it sounded like and the take's own Redo button, so a slip (a
// "three" taught as Five) is caught; the take is kept, since it may be how this user says it.
export function soundsLike(meaning, heard, heardAs, name, number) {
  if (!heard || !heardAs || heardAs === meaning) return "";
  const said = Array.from(heard);
  const short = said.length > 40 ? `${said.slice(0, 39).join("").trimEnd()}…` : heard;
  return `This take sounded like “${short}”, which is ${meaningName(heardAs)}; if you did not ` +
    `mean it as ${name}, press “Redo take ${number} of ${name}”.`;
}
