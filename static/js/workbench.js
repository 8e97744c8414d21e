// The comparison page: keyboard shortcuts, time on task, prefetching the next pair's images,
// dialogs, and opening the image viewer (viewer.js). Everything here is progressive: without
// this file the page still works with plain forms and links.
(function () {
  "use strict";

  // Answer keys pressed this soon after a pair appears are ignored: they were meant for the
  // last one.
  const KEY_GUARD_MS = 300;
  let shownAt = performance.now();
  // "sending": a post is in flight, keys are dropped (no double votes); "settling": the next
  // pair is on screen but htmx has not wired its forms yet.
  let state = "ready";
  let guardTimer = null;
  const prefetched = new Map(); // url -> Image, kept so the browser does not drop the request
  const PREFETCH_LIMIT = 64;

  function card() {
    return document.querySelector("[data-pair-card]");
  }

  // ---- The next pair, prepared ahead (docs/curators.md, "The next pair, prepared ahead") ----
  // The page carries the pair after this one (claimed ahead) in <template data-next-pair>:
  // its card is built out of the document with its players (players.js) and its media loading;
  // an answer shows it at once while the vote is sent, and the answer's response brings the
  // pair after that.
  let prepared = null; // the next pair's card, built, not in the document
  let leaveUrl = "";

  function prepareNext(root) {
    const template = root.querySelector("template[data-next-pair]");
    if (!template) return;
    const next = document.importNode(template.content, true).querySelector("[data-pair-card]");
    template.remove();
    prepared = next;
    leaveUrl = document.getElementById("workbench").getAttribute("data-leave-url") || "";
    document.body.setAttribute("data-leave-beacon", ""); // armed (the browser tests disarm it)
    if (next && window.arbiterPlayers) window.arbiterPlayers.prepare(next);
  }

  // Whether an answer through ``button`` can show the prepared pair before the server answers:
  // a vote (not a skip or a flag), with no "play to the end" countdown still running.
  function answersAhead(button) {
    const form = button.form;
    if (!prepared || !window.fetch || !form || !form.hasAttribute("data-vote-form")) return false;
    const note = document.querySelector("[data-pair-card] [data-play-left]");
    return !(note && note.textContent && !note.textContent.includes("You may vote"));
  }

  function answerAhead(button) {
    const form = button.form;
    const field = form.querySelector("[data-time-on-task]");
    if (field) field.value = String(Math.max(0, Math.round(performance.now() - shownAt)));
    const body = new FormData(form, button);
    const next = prepared;
    prepared = null;
    state = "sending";
    const old = card();
    old.replaceWith(next);
    if (window.htmx) window.htmx.process(next);
    // For the 3D viewer and the image viewer, as after htmx's swap.
    document.dispatchEvent(new CustomEvent("arbiter:pairswap", {detail: {old, card: next}}));
    if (window.arbiterPlayers) window.arbiterPlayers.activate(next);
    cardShown();
    window.scrollTo(0, 0);
    fetch(form.action, {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: {"HX-Request": "true", "HX-Target": "workbench", "HX-Current-URL": location.href},
    })
      .then((response) => response.text().then((html) => answered(html, response.status)))
      .catch(() => showError("No connection to the server. Your choice was not sent; reload the page."));
  }

  // The vote's answer: the pair on screen is the one the server serves (its lease the one
  // claimed ahead): the rest of the answer is taken (progress, notice, the pair after it).
  // Anything else (a refusal, another pair) replaces the workbench as htmx would.
  function answered(html, status) {
    const holder = document.createElement("template");
    holder.innerHTML = html;
    const fresh = holder.content.querySelector("#workbench");
    const shown = card();
    const freshCard = fresh && fresh.querySelector("[data-pair-card]");
    const workbench = document.getElementById("workbench");
    if (status < 400 && freshCard && shown && freshCard.dataset.assignment === shown.dataset.assignment) {
      for (const selector of [".wb-bar", ".wb-notice"]) {
        const part = fresh.querySelector(selector);
        workbench.querySelector(selector).replaceWith(part);
        if (window.htmx) window.htmx.process(part);
      }
      const template = fresh.querySelector("template[data-next-pair]");
      if (template) workbench.append(template);
      prepareNext(workbench);
      state = "ready";
      return;
    }
    if (window.htmx && fresh) {
      window.htmx.swap(workbench, html, {swapStyle: "outerHTML"});
      if (state !== "ready") cardReady();
    } else {
      showError("The server could not save that. Try again, or reload the page.");
    }
  }

  function prefetch(root) {
    const urls = (root.getAttribute("data-prefetch") || "").split(/\s+/).filter(Boolean);
    for (const url of urls) {
      if (prefetched.has(url)) continue;
      const image = new Image();
      image.decoding = "async";
      image.src = url;
      prefetched.set(url, image);
    }
    while (prefetched.size > PREFETCH_LIMIT) {
      prefetched.delete(prefetched.keys().next().value);
    }
  }

  // A new pair is on screen: restart the clock, and take no keys for KEY_GUARD_MS (the card
  // shows it with wb-settling, which the browser tests wait for too).
  // The vote bar's height, kept on the card as --wb-decide-height (it grows when the reason or
  // the skip panel opens): what the pair brings into view stops above the bar (arbiter.css).
  const decideHeight =
    "ResizeObserver" in window
      ? new ResizeObserver((entries) => {
          for (const entry of entries) {
            const decide = entry.target;
            const current = decide.closest("[data-pair-card]");
            if (current) current.style.setProperty("--wb-decide-height", `${decide.offsetHeight}px`);
          }
        })
      : null;

  function cardShown() {
    shownAt = performance.now();
    const current = card();
    if (!current) return;
    const decide = current.querySelector("[data-decide]");
    if (decideHeight && decide) {
      decideHeight.disconnect();
      decideHeight.observe(decide);
    }
    current.classList.add("wb-settling");
    clearTimeout(guardTimer);
    guardTimer = setTimeout(() => current.classList.remove("wb-settling"), KEY_GUARD_MS);
  }

  // Its forms are live: warm the cache for the pair after it, or prepare it.
  function cardReady() {
    state = "ready";
    const current = card();
    if (current) prefetch(current);
    const workbench = document.getElementById("workbench");
    if (workbench) prepareNext(workbench);
  }

  function tooSoon() {
    return card() !== null && performance.now() - shownAt < KEY_GUARD_MS;
  }

  function openDialog(id) {
    const dialog = document.getElementById(id);
    if (!dialog || dialog.open) return false;
    dialog.showModal();
    // showModal focuses the Close button at the end, which scrolls a long list there: the
    // dialog opens at its top instead.
    for (const element of [dialog, ...dialog.querySelectorAll(".wb-dialog-body")]) {
      element.scrollTop = 0;
    }
    return true;
  }

  function openDialogs() {
    return document.querySelectorAll("dialog[open]").length > 0;
  }

  function submitWith(button) {
    if (!button || state !== "ready") return;
    const form = button.form;
    if (form && !form.reportValidity()) return;
    if (answersAhead(button)) answerAhead(button);
    else button.click(); // a real click, so htmx sends the button's name and value
  }

  function openReason() {
    const box = document.querySelector("[data-pair-card] [data-reason]");
    if (!box) return;
    const panel = box.closest("[data-reason-panel]");
    if (panel) panel.open = true;
    box.focus();
  }

  function zoomIndex(link) {
    const image = link.querySelector("img");
    const side = image && image.getAttribute("data-side");
    const all = Array.from(document.querySelectorAll(`[data-pair-card] img[data-side="${side}"]`));
    return Math.max(0, all.indexOf(image));
  }

  function openSkip() {
    const panel = document.querySelector("[data-skip]");
    if (!panel) return;
    panel.open = true;
    const first = panel.querySelector("[data-skip-key]");
    if (first) first.focus();
  }

  function openFlag() {
    const panel = document.querySelector("[data-flag]");
    if (!panel) return;
    panel.open = true;
    const kind = panel.querySelector("[data-flag-kind]:checked") || panel.querySelector("[data-flag-kind]");
    if (kind) kind.focus();
  }

  function isTyping(target) {
    return (
      target instanceof HTMLElement &&
      (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
    );
  }

  function moveFocus(step) {
    const options = Array.from(document.querySelectorAll("[data-pair-card] [data-key]"));
    if (!options.length) return;
    const index = options.indexOf(document.activeElement);
    const next = index < 0 ? (step > 0 ? 0 : options.length - 1) : index + step;
    options[Math.max(0, Math.min(options.length - 1, next))].focus();
  }

  function onKeydown(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const target = event.target;
    if (event.key === "Enter" && target instanceof Element && target.matches("[data-flag-kind]")) {
      // Enter on a kind sends the flag, as it would from a text box.
      event.preventDefault();
      submitWith(target.form.querySelector("[data-flag-submit]"));
      return;
    }
    if (event.key === "Escape" && isTyping(target)) {
      target.blur();
      return;
    }
    if (isTyping(target) || openDialogs()) return; // dialogs close themselves on Escape
    if (state !== "ready" || (tooSoon() && ANSWERS.test(event.key))) {
      if (SHORTCUTS.test(event.key)) event.preventDefault();
    } else if (handleKey(event.key)) {
      event.preventDefault();
    }
  }

  const SHORTCUTS = /^([1-9]|Arrow(Left|Right|Down)|[sugrzf?]|Escape)$/;
  // The keys that answer a pair, which the guard after a new pair holds back.
  const ANSWERS = /^([1-9]|Arrow(Left|Right|Down)|[sr])$/;

  function handleKey(key) {
    const skipPanel = document.querySelector("[data-skip]");
    const skipping = skipPanel && skipPanel.open;
    if (key === "Escape" && skipping) {
      skipPanel.open = false;
    } else if (/^[1-9]$/.test(key)) {
      const selector = skipping ? `[data-skip-key="${key}"]` : `[data-pair-card] [data-key="${key}"]`;
      const button = document.querySelector(selector);
      if (!button) return false;
      submitWith(button);
    } else if (key === "ArrowLeft" || key === "ArrowRight" || key === "ArrowDown") {
      const button = document.querySelector(`[data-pair-card] [data-arrow="${key}"]`);
      if (button) submitWith(button);
      else if (key !== "ArrowDown") moveFocus(key === "ArrowLeft" ? -1 : 1);
      else return false;
    } else if (key === "s") {
      openSkip();
    } else if (key === "f") {
      openFlag();
    } else if (key === "u") {
      const undo = document.querySelector("[data-undo] button");
      if (undo) submitWith(undo);
    } else if (key === "r") {
      openReason();
    } else if (key === "z") {
      if (!window.arbiterViewer || !window.arbiterViewer.open(0)) return false;
    } else if (key === "g") {
      openDialog("guidelines-modal");
    } else if (key === "?") {
      openDialog("shortcuts-modal");
    } else {
      return false;
    }
    return true;
  }

  // Time on task rides along in a hidden field, with or without htmx. A vote clicked with the
  // mouse shows the prepared pair as an answer key does: taken here, in the capture phase,
  // before htmx sees the submit (the browser has checked the form's validity by now).
  function onSubmit(event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.closest("#workbench")) return;
    const button = event.submitter;
    if (state === "ready" && button && answersAhead(button)) {
      event.preventDefault();
      event.stopPropagation();
      answerAhead(button);
      return;
    }
    const field = form.querySelector("[data-time-on-task]");
    if (field) field.value = String(Math.max(0, Math.round(performance.now() - shownAt)));
    if (window.htmx && form.hasAttribute("hx-post")) state = "sending";
  }

  function onClick(event) {
    const link = event.target.closest("a[data-dialog], a[data-zoom]");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (link.hasAttribute("data-dialog")) {
      if (openDialog(link.getAttribute("data-dialog"))) event.preventDefault();
      return;
    }
    if (window.arbiterViewer && window.arbiterViewer.open(zoomIndex(link))) event.preventDefault();
  }

  function showError(message) {
    state = "ready";
    const notice = document.querySelector("#workbench .wb-notice");
    if (notice) {
      notice.textContent = message;
      notice.classList.add("wb-error");
    }
  }

  // Leaving the page frees the pair claimed ahead for it (a beacon: it outlives the page).
  window.addEventListener("pagehide", function () {
    const token = document.querySelector("#workbench input[name=csrfmiddlewaretoken]");
    if (!leaveUrl || !token || !navigator.sendBeacon) return;
    if (!document.body.hasAttribute("data-leave-beacon")) return;
    const body = new FormData();
    body.append("csrfmiddlewaretoken", token.value);
    navigator.sendBeacon(leaveUrl, body);
  });
  document.addEventListener("keydown", onKeydown);
  document.addEventListener("submit", onSubmit, true);
  document.addEventListener("click", onClick);
  document.addEventListener("DOMContentLoaded", function () {
    cardShown();
    cardReady();
  });
  // afterSwap: the next pair is in the document; load: htmx has wired its forms.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target instanceof HTMLElement && event.target.id === "workbench") {
      state = "settling";
      cardShown();
      window.scrollTo(0, 0);
    }
  });
  document.addEventListener("htmx:load", function (event) {
    if (event.detail.elt && event.detail.elt.id === "workbench") cardReady();
  });
  document.addEventListener("htmx:afterRequest", function () {
    if (state === "sending") state = "ready"; // answered without a swap
  });
  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr ? event.detail.xhr.status : 0;
    showError(
      status === 403
        ? "Your session has expired or you lost access. Reload the page to continue."
        : "The server could not save that. Try again, or reload the page.",
    );
  });
  document.addEventListener("htmx:sendError", function () {
    showError("No connection to the server. Your choice was not sent; try again.");
  });
})();
