// Small DOM helpers shared by the approve page's modules.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  // textContent only: card text is the agent's words and must never become markup.
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

let pending = [];
let flush = null;

export function say(text) {
  // Messages said in one turn are read together; clearing first makes a repeat be read again.
  pending.push(text);
  clearTimeout(flush);
  const region = $("announce");
  region.textContent = "";
  flush = setTimeout(() => {
    region.textContent = pending.join(" ");
    pending = [];
  }, 50);
}
