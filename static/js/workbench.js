// The comparison page: keyboard shortcuts, time on task, prefetching the next pair's images,
// dialogs and the image lightbox. Everything here is progressive: without this file the page
// still works with plain forms and links.
(function () {
  "use strict";

  let shownAt = performance.now();
  let busy = false;
  const prefetched = new Map(); // url -> Image, kept so the browser does not drop the request
  const PREFETCH_LIMIT = 64;

  function card() {
    return document.querySelector("[data-pair-card]");
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

  // A new pair is on screen: restart the clock, warm the cache for the next one.
  function cardShown() {
    busy = false;
    shownAt = performance.now();
    const current = card();
    if (current) prefetch(current);
  }

  function openDialog(id) {
    const dialog = document.getElementById(id);
    if (!dialog || dialog.open) return false;
    dialog.showModal();
    return true;
  }

  function openDialogs() {
    return document.querySelectorAll("dialog[open]").length > 0;
  }

  function submitWith(button) {
    if (!button || busy) return;
    const form = button.form;
    if (form && !form.reportValidity()) return;
    button.click(); // a real click, so htmx sends the button's name and value
  }

  function openSkip() {
    const panel = document.querySelector("[data-skip]");
    if (!panel) return;
    panel.open = true;
    const first = panel.querySelector("[data-skip-key]");
    if (first) first.focus();
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
    if (event.key === "Escape" && isTyping(target)) {
      target.blur();
      return;
    }
    if (isTyping(target) || openDialogs()) return; // dialogs close themselves on Escape

    const skipPanel = document.querySelector("[data-skip]");
    const skipping = skipPanel && skipPanel.open;
    const key = event.key;
    let handled = true;

    if (key === "Escape" && skipping) {
      skipPanel.open = false;
    } else if (/^[1-9]$/.test(key)) {
      const selector = skipping ? `[data-skip-key="${key}"]` : `[data-pair-card] [data-key="${key}"]`;
      const button = document.querySelector(selector);
      if (button) submitWith(button);
      else handled = false;
    } else if (key === "ArrowLeft" || key === "ArrowRight" || key === "ArrowDown") {
      const button = document.querySelector(`[data-pair-card] [data-arrow="${key}"]`);
      if (button) submitWith(button);
      else if (key !== "ArrowDown") moveFocus(key === "ArrowLeft" ? -1 : 1);
      else handled = false;
    } else if (key === "s") {
      openSkip();
    } else if (key === "u") {
      const undo = document.querySelector("[data-undo] button");
      if (undo) submitWith(undo);
    } else if (key === "g") {
      openDialog("guidelines-modal");
    } else if (key === "?") {
      openDialog("shortcuts-modal");
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  }

  // Time on task rides along in a hidden field, with or without htmx.
  function onSubmit(event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.closest("#workbench")) return;
    const field = form.querySelector("[data-time-on-task]");
    if (field) field.value = String(Math.max(0, Math.round(performance.now() - shownAt)));
    busy = true;
  }

  function onClick(event) {
    const link = event.target.closest("a[data-dialog], a[data-lightbox]");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (link.hasAttribute("data-dialog")) {
      if (openDialog(link.getAttribute("data-dialog"))) event.preventDefault();
      return;
    }
    const lightbox = document.getElementById("lightbox");
    const image = lightbox && lightbox.querySelector("[data-lightbox-image]");
    if (!image) return;
    event.preventDefault();
    image.src = link.href;
    image.alt = (link.querySelector("img") || {}).alt || "";
    lightbox.showModal();
  }

  function onLightboxClick(event) {
    const lightbox = document.getElementById("lightbox");
    if (event.target === lightbox || event.target.hasAttribute("data-lightbox-image")) {
      lightbox.close();
    }
  }

  function showError(message) {
    busy = false;
    const notice = document.querySelector("#workbench .wb-notice");
    if (notice) {
      notice.textContent = message;
      notice.classList.add("wb-error");
    }
  }

  document.addEventListener("keydown", onKeydown);
  document.addEventListener("submit", onSubmit, true);
  document.addEventListener("click", onClick);
  document.addEventListener("DOMContentLoaded", function () {
    cardShown();
    const lightbox = document.getElementById("lightbox");
    if (lightbox) lightbox.addEventListener("click", onLightboxClick);
  });
  // htmx fires "htmx:load" on content it has just swapped in.
  document.addEventListener("htmx:load", function (event) {
    if (event.detail.elt && event.detail.elt.id === "workbench") {
      cardShown();
      window.scrollTo(0, 0);
    }
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
