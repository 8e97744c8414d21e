// The adjudication page's keys: 1-3 pick the label (in the order shown), n goes to the note,
// r reveals the model names, Ctrl+Enter (or Cmd+Enter) decides. Without this file the page
// works with its plain forms.
(function () {
  "use strict";

  function isTyping(target) {
    return (
      target instanceof HTMLElement &&
      (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
    );
  }

  document.addEventListener("keydown", function (event) {
    const form = document.querySelector("[data-decide-form]");
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter" && form) {
      event.preventDefault();
      form.requestSubmit();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
    if (event.key === "r") {
      const reveal = document.querySelector("[data-reveal] button");
      if (reveal) {
        event.preventDefault();
        reveal.click();
      }
      return;
    }
    if (!form) return;
    const note = form.querySelector("textarea[name=note]");
    if (event.key === "n" && note) {
      event.preventDefault();
      note.focus();
      return;
    }
    const radio = form.querySelector('input[name=label][data-key="' + event.key + '"]');
    if (radio) {
      event.preventDefault();
      radio.checked = true;
      if (note) note.focus();
    }
  });
})();
