// The approval window's script: shows the card the server drew, runs the passkey
// ceremony for it, and says what happened. Text is set with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const say = (text) => { $("status").textContent = text; };

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error((answer.error && answer.error.message) || `HTTP ${response.status}`);
  }
  return answer;
}

// A WebAuthn ceremony from the server's options; the credential as JSON.
async function ceremony(options, create) {
  const pkc = window.PublicKeyCredential;
  if (!pkc || !pkc.parseRequestOptionsFromJSON) {
    throw new Error("this browser cannot use passkeys here");
  }
  const publicKey = create
    ? pkc.parseCreationOptionsFromJSON(options.publicKey)
    : pkc.parseRequestOptionsFromJSON(options.publicKey);
  const credential = create
    ? await navigator.credentials.create({ publicKey })
    : await navigator.credentials.get({ publicKey });
  return credential.toJSON();
}

const CALLERS = { assistant: "the page's assistant", webmcp: "a browser agent", mcp: "an MCP client" };

function show(view) {
  const card = view.card;
  $("caller").textContent = CALLERS[view.caller] || view.caller;
  $("session").textContent = view.session;
  $("opened").textContent = new Date(view.opened_ms).toLocaleTimeString();
  $("title").textContent = card.title;
  $("kind").textContent = `Risk: ${card.kind}`;
  $("kind").className = `kind-${card.kind}`;
  $("consequence").textContent = card.consequence || "";
  // The declaration's preview, when it has one: the token binds it with the words.
  const preview = card.preview || {};
  const counts = (preview.counts || []).map(([label, n]) => `${label}: ${n}`);
  $("preview").textContent = [preview.diff || "", ...counts].filter(Boolean).join("\n");
  $("preview").hidden = !card.preview;
  // The server's own text of the arguments: every digit as the token binds it.
  $("arguments").textContent = view.arguments_text;
  $("role").textContent = card.role;
  $("card").hidden = false;
}

function ended(state, approver) {
  for (const id of ["approve", "deny"]) $(id).disabled = true;
  const words = {
    approved: `Approved${approver ? ` by ${approver}` : ""}. You can close this window.`,
    denied: "Denied. Nothing was done.",
    expired: "This approval has expired. Nothing was done.",
    abandoned: "The page that asked is gone (reloaded or closed). Nothing was done.",
  };
  say(words[state] || state);
}

async function approval(id) {
  let view;
  try {
    view = await api(`/api/requests/${encodeURIComponent(id)}`);
  } catch (e) {
    say(e.message);
    return;
  }
  show(view);
  const open = (state) => state === "waiting" || state === "being approved";
  if (!open(view.state)) {
    ended(view.state, view.approver);
    return;
  }
  $("qr").src = `/api/requests/${encodeURIComponent(id)}/qr.svg`;
  $("address").textContent = location.href;
  // Decided on another device (or withdrawn by the page): this window follows.
  const follow = setInterval(async () => {
    try {
      const now = await api(`/api/requests/${encodeURIComponent(id)}`);
      if (!open(now.state)) {
        clearInterval(follow);
        ended(now.state, now.approver);
        if (now.state === "approved") setTimeout(() => window.close(), 1500);
      }
    } catch (e) {
      clearInterval(follow);
      say(e.message);
    }
  }, 1500);
  $("approve").addEventListener("click", async () => {
    $("approve").disabled = true;
    try {
      say("Confirm with your passkey…");
      const started = await api(`/api/requests/${encodeURIComponent(id)}/challenge`, {});
      const credential = await ceremony(started.options, false);
      const done = await api(`/api/requests/${encodeURIComponent(id)}/approve`, {
        ceremony: started.ceremony,
        credential,
      });
      ended("approved", done.approver);
      setTimeout(() => window.close(), 1500);
    } catch (e) {
      say(`Not approved: ${e.message}`);
      $("approve").disabled = false;
    }
  });
  $("deny").addEventListener("click", async () => {
    try {
      await api(`/api/requests/${encodeURIComponent(id)}/deny`, {});
      ended("denied");
    } catch (e) {
      say(e.message);
    }
  });
}

function enrollment() {
  $("enroll").hidden = false;
  $("enroll-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const started = await api("/api/enroll", {
        role: $("enroll-role").value.trim(),
        person: $("enroll-person").value.trim(),
        code: $("enroll-code").value.trim(),
      });
      const credential = await ceremony(started.options, true);
      const done = await api("/api/enroll/finish", { ceremony: started.ceremony, credential });
      say(`Enrolled: ${done.person} may approve for ${done.role} in this window.`);
    } catch (e) {
      say(`Not enrolled: ${e.message}`);
    }
  });
}

// The inbox: what waits for the signed-in person's role, kept live by an event stream;
// a system notification for each new one, once the person allowed them (on a click).
async function inbox() {
  $("inbox").hidden = false;
  let me;
  try {
    me = await api("/api/inbox");
  } catch (e) {
    $("signin").hidden = false;
    $("signin").addEventListener("click", async () => {
      try {
        const started = await api("/api/signin", {});
        const credential = await ceremony(started.options, false);
        await api("/api/signin/finish", { ceremony: started.ceremony, credential });
        location.reload();
      } catch (e) {
        say(`Not signed in: ${e.message}`);
      }
    });
    return;
  }
  $("who").textContent = `Signed in as ${me.person}, approving for ${me.role}.`;
  $("signout").hidden = false;
  $("signout").addEventListener("click", async () => {
    await api("/api/signout", {}).catch(() => {});
    location.reload();
  });
  if ("Notification" in window && Notification.permission !== "granted") {
    $("notify").hidden = false;
    $("notify").addEventListener("click", async () => {
      await Notification.requestPermission();
      $("notify").hidden = Notification.permission === "granted";
    });
  }
  const seen = new Set();
  let first = true;
  const render = (now) => {
    const list = $("waiting");
    list.replaceChildren();
    for (const item of now.waiting) {
      const li = document.createElement("li");
      const link = document.createElement("a");
      link.href = `/approve#${item.id}`;
      link.textContent = item.card.title;
      const what = document.createElement("p");
      what.textContent = item.card.consequence || "";
      const who = document.createElement("p");
      who.textContent = `Risk: ${item.card.kind}. Asked at ${new Date(item.opened_ms).toLocaleTimeString()} by ${CALLERS[item.caller] || item.caller} (as the page says), session ${item.session}.`;
      li.append(link, what, who);
      list.append(li);
      const fresh = !first && !seen.has(item.id);
      if (fresh && "Notification" in window && Notification.permission === "granted" && document.hidden) {
        new Notification("Countersign: an approval waits", {
          body: `${item.card.title} (${item.card.kind}), asked by ${CALLERS[item.caller] || item.caller}`,
        });
      }
      seen.add(item.id);
    }
    first = false;
    say(now.waiting.length ? "" : "Nothing waits for you.");
  };
  render(me);
  const refresh = async () => {
    try {
      render(await api("/api/inbox"));
    } catch (e) {
      events.close();
      say(e.message);
    }
  };
  const events = new EventSource("/api/inbox/events");
  events.onmessage = refresh;
  events.onerror = () => say("The inbox lost its connection; it tries again, or reload.");
  // Expired approvals leave the list even when nothing else changes.
  setInterval(refresh, 15000);
}

// Another approval's address opened in this tab: show that one.
window.addEventListener("hashchange", () => location.reload());

const request = location.hash.slice(1);
if (location.pathname === "/inbox") {
  inbox();
} else if (location.pathname === "/enroll" || !request) {
  enrollment();
} else {
  approval(request);
}
