// Video and audio on the comparison, pair and adjudication pages: the responses' players run
// from one control bar and one clock (play, pause, scrubber, frame step, speed, a loop, which
// side is heard), each audio part shows its waveform with the playhead, and on the comparison
// page the next pair's media is fetched ahead and the "play to the end" countdown runs. The
// keys are listed in the page's ? help and in docs/curators.md ("Video and audio on the
// comparison page"). Without this file the media play with the browser's own controls.
(function () {
  "use strict";

  const SPEEDS = [0.25, 0.5, 0.75, 1, 1.25, 1.5, 2];
  const SEEK_SECONDS = 5;
  const AUDIO_STEP_SECONDS = 0.05; // "one frame" of audio
  // The sync loop: a follower further than HARD_SYNC_SECONDS from the clock is moved there;
  // a smaller drift is taken back by playing it a little faster or slower, over
  // CATCH_UP_SECONDS, never more than MAX_NUDGE off the speed chosen.
  const HARD_SYNC_SECONDS = 0.15;
  const CATCH_UP_SECONDS = 0.25;
  const MAX_NUDGE = 0.25;
  // After a side is muted or unmuted, Chromium moves it to another output: for up to about a
  // tenth of a second the time it gives is stale (a side just heard stands still, then
  // jumps). For SETTLE_MS the clock stays where it was and the side heard plays on at the
  // speed chosen, moved by nobody; then the side heard is the clock again.
  const SETTLE_MS = 250;
  const PREFETCH_LIMIT = 8;
  const KEYS = /^( |,|\.|j|l|-|=|\+|i|o|c|x|\[|\])$/;

  let deck = null;
  const prefetched = new Map(); // url -> detached media element, kept so its data stays

  function isTyping(target) {
    return (
      target instanceof HTMLElement &&
      (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
    );
  }

  function durationOf(media) {
    if (Number.isFinite(media.duration) && media.duration > 0) return media.duration;
    return parseFloat(media.getAttribute("data-duration")) || 0;
  }

  function clock(seconds) {
    const whole = Math.max(0, seconds);
    const minutes = Math.floor(whole / 60);
    const rest = (whole - minutes * 60).toFixed(2).padStart(5, "0");
    return `${minutes}:${rest}`;
  }

  function sideLabel(side) {
    return side.charAt(0).toUpperCase() + side.slice(1);
  }

  function button(text, label, onClick) {
    const element = document.createElement("button");
    element.type = "button";
    element.textContent = text;
    element.setAttribute("aria-label", label);
    element.addEventListener("click", onClick);
    return element;
  }

  // ---- The deck: one clock for the responses' media ----

  function build(root, preparing = false) {
    const responses = Array.from(
      root.querySelectorAll(".wb-response video[data-side], .wb-response audio[data-side]"),
    );
    // Without timed responses, the prompt's media (text+video-to-text) take the keys.
    const media = responses.length
      ? responses
      : Array.from(root.querySelectorAll(".wb-prompt video[data-side], .wb-prompt audio[data-side]"));
    if (!media.length) return null;
    const sides = [...new Set(media.map((element) => element.getAttribute("data-side")))];
    const rates = media
      .map((element) => parseFloat(element.getAttribute("data-frame-rate")))
      .filter((rate) => rate > 0);
    const state = {
      root,
      media,
      sides,
      frame: rates.length ? 1 / Math.max(...rates) : AUDIO_STEP_SECONDS,
      speed: 1,
      playing: false,
      loopIn: null,
      loopOut: null,
      // One side heard at a time, the first to begin with (ABX listening).
      muted: Object.fromEntries(sides.map((side, index) => [side, index > 0])),
      loop: 0,
      settle: null, // after a mute or an unmute: {element: the clock before, until: ms}
      ui: {},
    };
    for (const element of media) {
      element.controls = false;
      if (!preparing) element.preload = "auto"; // a prepared card's: within the budget (prepare)
      element.addEventListener("loadedmetadata", () => render(state));
      element.addEventListener("ended", () => ended(state, element));
    }
    state.ui = controls(state);
    // Above the responses, or under the prompt's parts when they are what it plays.
    const responsesBox = responses.length && root.querySelector(".wb-responses");
    if (responsesBox) responsesBox.before(state.ui.bar);
    else media[0].closest(".wb-parts").after(state.ui.bar);
    applyMuting(state);
    render(state);
    return state;
  }

  function controls(state) {
    const bar = document.createElement("div");
    bar.className = "wb-deck";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", "Video and audio controls");
    bar.setAttribute("data-deck", "");
    bar.clock = () => position(state); // the clock's time, for the browser tests
    const play = button("Play", "Play or pause (Space)", () => toggle(state));
    play.setAttribute("data-deck-play", "");
    const back = button("‹", "One frame back (,)", () => step(state, -1));
    const forward = button("›", "One frame forward (.)", () => step(state, 1));
    const scrubber = document.createElement("input");
    scrubber.type = "range";
    scrubber.min = "0";
    scrubber.step = "any";
    scrubber.value = "0";
    scrubber.className = "wb-deck-scrubber";
    scrubber.setAttribute("aria-label", "Position");
    scrubber.setAttribute("data-deck-scrubber", "");
    scrubber.addEventListener("input", () => seek(state, parseFloat(scrubber.value)));
    const time = document.createElement("span");
    time.className = "wb-deck-time";
    time.setAttribute("data-deck-time", "");
    const speed = button("1×", "Speed (- slower, = faster)", () => changeSpeed(state, 1, true));
    speed.setAttribute("data-deck-speed", "");
    const loop = document.createElement("span");
    loop.className = "wb-deck-loop";
    loop.setAttribute("data-deck-loop", "");
    const mutes = {};
    for (const side of state.sides) {
      const key = state.sides.indexOf(side) === 0 ? "[" : "]";
      mutes[side] = button("", `Mute or unmute the ${side} (${key})`, () => {
        state.muted[side] = !state.muted[side];
        applyMuting(state);
        render(state);
      });
      mutes[side].setAttribute("data-deck-mute", side);
    }
    const swap = button("Switch side heard", "Hear the other side (x)", () => switchHeard(state));
    swap.setAttribute("data-deck-switch", "");
    const keys = document.createElement("span");
    keys.className = "wb-deck-keys muted";
    keys.textContent = "Space play · , . frame · j l 5 s · - = speed · i o c loop · x switch · [ ] mute";
    bar.append(play, back, forward, scrubber, time, speed, loop, ...Object.values(mutes), swap, keys);
    return { bar, play, scrubber, time, speed, loop, mutes };
  }

  // The longest of the media: the others end on their own before it.
  function primary(state) {
    return state.media.reduce((best, element) =>
      durationOf(element) > durationOf(best) ? element : best,
    );
  }

  function length(state) {
    return durationOf(primary(state));
  }

  // The clock: the side heard, where one side is heard and has not ended, else the longest
  // of the media. The sound a person listens to is never played faster or slower to follow
  // another player, whichever side ``x`` has made the one heard: the others follow it.
  // (Chromium shifts a player's clock by some tens of ms when it is muted or unmuted; a clock
  // kept on one fixed player, muted by ``x``, pulled the side heard after that shift.) For
  // SETTLE_MS after a mute or an unmute the clock stays on the player it was.
  // ``now`` is the sync loop's one reading of the time for a frame: the clock it picks and the
  // "just heard" rule it applies to the other side must agree on whether the settling is over
  // (read twice, a frame that straddled its end had the side just heard nudged as a follower).
  function clockElement(state, now = performance.now()) {
    const settle = state.settle;
    if (settle && now < settle.until) {
      if (!settle.element.seeking && !settle.element.ended) return settle.element;
    }
    const longest = primary(state);
    const heard = state.media.filter((element) => !element.muted);
    if (heard.length !== 1 || heard[0] === longest) return longest;
    const side = heard[0];
    return !side.ended && !side.seeking && playable(side, longest.currentTime) ? side : longest;
  }

  function position(state) {
    return clockElement(state).currentTime;
  }

  function playable(element, at) {
    return at < durationOf(element) - 0.01;
  }

  function play(state) {
    const at = position(state) >= length(state) - 0.01 ? 0 : position(state);
    const start = state.loopIn !== null && state.loopOut !== null && at >= state.loopOut ? state.loopIn : at;
    for (const element of state.media) {
      element.playbackRate = state.speed;
      if (!playable(element, start)) continue;
      if (Math.abs(element.currentTime - start) > 0.001) element.currentTime = start;
      element.play().catch(() => undefined); // refused without a user gesture: stays paused
    }
    state.playing = true;
    run(state);
    render(state);
  }

  function pause(state) {
    for (const element of state.media) element.pause();
    state.playing = false;
    cancelAnimationFrame(state.loop);
    align(state, position(state));
    render(state);
  }

  function toggle(state) {
    if (state.playing) pause(state);
    else play(state);
  }

  // Every element to ``at`` (an element shorter than that to its end), unless it is within
  // ``slack`` seconds of it already (a seek costs a decode: half a millisecond is nothing
  // to the eye when playing together).
  function align(state, at, slack = 0.0005) {
    for (const element of state.media) {
      const target = Math.min(at, durationOf(element));
      if (Math.abs(element.currentTime - target) > slack) element.currentTime = target;
    }
  }

  // A seek asked for lands exactly: a frame step from a time a hair before the next frame
  // (3.0799 s at 25 fps) must still reach that frame's presentation time.
  function seek(state, at) {
    const target = Math.max(0, Math.min(at, length(state)));
    align(state, target, 0);
    if (state.playing) {
      for (const element of state.media) {
        if (playable(element, target) && element.paused) element.play().catch(() => undefined);
      }
    }
    render(state, target);
  }

  // The frame shown at ``at``: the last one presented at or before it (frame n is presented
  // at n frame lengths). FRAME_SLACK takes in the browser's rounding of times to whole
  // microseconds (1/30 s reads back as 0.033333).
  const FRAME_SLACK = 0.00001;

  function frameAt(state, at) {
    return Math.floor((at + FRAME_SLACK) / state.frame);
  }

  // A frame's presentation time, rounded up to the whole microsecond: a seek there shows that
  // frame, not the one before.
  function frameTime(state, frame) {
    return Math.ceil(Math.round(frame * state.frame * 1e9) / 1e3) / 1e6;
  }

  // One frame on or back from the frame shown, even from a position between two frames'
  // presentation times: to the next (or the previous) frame's presentation time.
  function step(state, direction) {
    if (state.playing) pause(state);
    const frame = Math.max(0, frameAt(state, position(state)) + direction);
    seek(state, frameTime(state, frame));
  }

  function changeSpeed(state, direction, wrap) {
    let index = SPEEDS.indexOf(state.speed) + direction;
    if (wrap && index >= SPEEDS.length) index = 0;
    state.speed = SPEEDS[Math.max(0, Math.min(SPEEDS.length - 1, index))];
    const at = position(state);
    for (const element of state.media) element.playbackRate = state.speed;
    if (state.playing) align(state, at); // start the new speed together
    render(state);
  }

  function setLoop(state, end) {
    const at = position(state);
    if (end === "in") state.loopIn = at;
    else state.loopOut = at;
    if (state.loopIn === null) state.loopIn = 0;
    if (state.loopOut !== null && state.loopOut <= state.loopIn) {
      if (end === "in") state.loopOut = null;
      else state.loopIn = 0;
    }
    render(state);
  }

  function clearLoop(state) {
    state.loopIn = null;
    state.loopOut = null;
    render(state);
  }

  function switchHeard(state) {
    const heard = state.sides.filter((side) => !state.muted[side]);
    const current = heard.length === 1 ? state.sides.indexOf(heard[0]) : -1;
    const next = state.sides[(current + 1) % state.sides.length];
    for (const side of state.sides) state.muted[side] = side !== next;
    applyMuting(state); // the position is untouched: both sides go on playing
    render(state);
  }

  // Chromium moves a muted player to a silent output (and back when unmuted), which shifts
  // its clock by some tens of ms; the sync loop takes that back within a few tenths of a
  // second.
  function applyMuting(state) {
    if (state.playing) state.settle = {element: clockElement(state), until: performance.now() + SETTLE_MS};
    for (const element of state.media) {
      element.muted = Boolean(state.muted[element.getAttribute("data-side")]);
      // A side now heard may have been following the clock a little faster or slower: it
      // plays at the speed chosen from now on (the clock's own speed).
      if (!element.muted && state.playing) element.playbackRate = state.speed;
    }
  }

  function ended(state, element) {
    if (element !== primary(state)) return;
    if (state.loopIn !== null && state.loopOut === null) {
      seek(state, state.loopIn);
      play(state);
      return;
    }
    state.playing = false;
    cancelAnimationFrame(state.loop);
    render(state);
  }

  // A seek takes time (tens of ms on a loaded machine) while the clock plays on, so a
  // follower moved to the clock's time lands behind it by that much, and a muted one, moved
  // at half a frame's drift, would be moved again and again without catching up. Each
  // follower's last seek time is measured and the next seek aims that far ahead.
  const seekLead = new WeakMap(); // element -> seconds of media time a seek costs

  function hardSync(state, element, at) {
    const started = performance.now();
    element.addEventListener(
      "seeked",
      () => {
        const took = ((performance.now() - started) / 1000) * state.speed;
        const before = seekLead.get(element);
        const lead = before === undefined ? took : (before + took) / 2;
        seekLead.set(element, Math.min(lead, HARD_SYNC_SECONDS));
      },
      {once: true},
    );
    element.currentTime = at + (seekLead.get(element) || 0);
  }

  // Keeps the followers on the clock, loops, and redraws, once a frame while playing.
  function run(state) {
    cancelAnimationFrame(state.loop);
    const tick = () => {
      if (!state.playing || deck !== state) return;
      const now = performance.now();
      const settling = Boolean(state.settle) && now < state.settle.until;
      let clock = clockElement(state, now);
      let at = clock.currentTime;
      if (state.loopOut !== null && at >= state.loopOut) {
        seek(state, state.loopIn || 0);
        clock = clockElement(state, now);
        at = clock.currentTime;
      }
      for (const element of state.media) {
        if (element === clock) {
          // The clock plays at the speed chosen, whatever it did while it followed.
          if (Math.abs(element.playbackRate - state.speed) > 0.001) element.playbackRate = state.speed;
          continue;
        }
        if (element.ended || !playable(element, at)) continue; // it ends on its own
        if (element.paused && !clock.paused) element.play().catch(() => undefined);
        if (element.seeking) continue; // a hard sync still under way
        if (!element.muted && settling) {
          // Just heard: it plays on at the speed chosen until its time is fresh.
          if (Math.abs(element.playbackRate - state.speed) > 0.001) element.playbackRate = state.speed;
          continue;
        }
        const drift = element.currentTime - at;
        let rate = state.speed;
        // A side not heard is moved at once: its stutter is neither seen (audio) nor heard.
        const hard = element.muted && element.tagName === "AUDIO" ? state.frame / 2 : HARD_SYNC_SECONDS;
        if (Math.abs(drift) > hard) {
          hardSync(state, element, at);
        } else if (Math.abs(drift) > state.frame / 4) {
          const nudge = Math.max(-MAX_NUDGE, Math.min(MAX_NUDGE, drift / CATCH_UP_SECONDS));
          rate = state.speed * (1 - nudge);
        }
        if (Math.abs(element.playbackRate - rate) > 0.001) element.playbackRate = rate;
      }
      render(state, at);
      state.loop = requestAnimationFrame(tick);
    };
    state.loop = requestAnimationFrame(tick);
  }

  function render(state, at) {
    const now = at === undefined ? position(state) : at;
    const total = length(state);
    const ui = state.ui;
    ui.play.textContent = state.playing ? "Pause" : "Play";
    ui.play.setAttribute("aria-pressed", String(state.playing));
    ui.scrubber.max = String(total || 0);
    if (document.activeElement !== ui.scrubber || state.playing) ui.scrubber.value = String(now);
    ui.time.textContent = `${clock(now)} / ${clock(total)}`;
    ui.speed.textContent = `${state.speed}×`;
    ui.loop.textContent =
      state.loopIn === null
        ? "No loop"
        : `Loop ${clock(state.loopIn)} – ${state.loopOut === null ? "end" : clock(state.loopOut)}`;
    for (const side of state.sides) {
      ui.mutes[side].textContent = `${sideLabel(side)}: ${state.muted[side] ? "muted" : "heard"}`;
      ui.mutes[side].setAttribute("aria-pressed", String(state.muted[side]));
    }
    drawWaveforms(state.root, state);
  }

  // ---- Waveforms ----

  function drawWaveform(canvas, state) {
    const figure = canvas.closest("[data-media-part]");
    const audio = figure && figure.querySelector("audio");
    const peaks = (canvas.getAttribute("data-peaks") || "").split(/\s+/).filter(Boolean).map(Number);
    const width = Math.max(1, Math.round(canvas.clientWidth * (window.devicePixelRatio || 1)));
    const height = Math.max(1, Math.round(canvas.clientHeight * (window.devicePixelRatio || 1)));
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    const context = canvas.getContext("2d");
    const style = getComputedStyle(canvas);
    context.clearRect(0, 0, width, height);
    const total = audio ? durationOf(audio) : 0;
    if (state && total && state.loopIn !== null) {
      const from = (state.loopIn / total) * width;
      const to = ((state.loopOut === null ? total : state.loopOut) / total) * width;
      context.fillStyle = style.getPropertyValue("--wb-loop").trim() || "rgba(0, 0, 0, 0.08)";
      context.fillRect(from, 0, Math.max(1, to - from), height);
    }
    context.fillStyle = style.color;
    const bar = width / Math.max(1, peaks.length);
    peaks.forEach((peak, index) => {
      const size = Math.max(1, peak * height);
      context.fillRect(index * bar, (height - size) / 2, Math.max(1, bar - 1), size);
    });
    if (audio && total) {
      context.fillStyle = style.getPropertyValue("--wb-playhead").trim() || "red";
      context.fillRect(Math.min(width - 2, (audio.currentTime / total) * width), 0, 2, height);
    }
    canvas.setAttribute("data-playhead", audio ? audio.currentTime.toFixed(3) : "0");
  }

  function drawWaveforms(root, state) {
    for (const canvas of root.querySelectorAll("[data-waveform]")) drawWaveform(canvas, state);
  }

  function onWaveformClick(event) {
    const canvas = event.target.closest("[data-waveform]");
    if (!canvas) return;
    const audio = canvas.closest("[data-media-part]").querySelector("audio");
    const share = (event.clientX - canvas.getBoundingClientRect().left) / canvas.clientWidth;
    if (deck && deck.media.includes(audio)) seek(deck, share * length(deck));
    else if (audio) audio.currentTime = share * durationOf(audio);
  }

  // ---- "Play each response to the end": the countdown beside the vote ----

  function startCountdown(root) {
    const note = root.querySelector("[data-play-to-end] [data-play-left]");
    if (!note) return;
    const media = Array.from(root.querySelectorAll(".wb-response video, .wb-response audio"));
    const needed = Math.max(0, ...media.map((element) => parseFloat(element.getAttribute("data-duration")) || 0));
    const shown = performance.now();
    const update = () => {
      if (!note.isConnected) return;
      const left = Math.ceil(needed - (performance.now() - shown) / 1000);
      note.textContent = left > 0 ? `${left} s left before a vote is taken.` : "You may vote now.";
      if (left > 0) setTimeout(update, 250);
    };
    update();
  }

  // ---- Prefetch: the next pair's video and audio, so its first frame shows at once ----

  function prefetch(root) {
    const card = root.querySelector("[data-pair-card]") || root;
    for (const [attribute, tag] of [["data-prefetch-video", "video"], ["data-prefetch-audio", "audio"]]) {
      const urls = (card.getAttribute(attribute) || "").split(/\s+/).filter(Boolean);
      for (const url of urls) {
        if (prefetched.has(url)) continue;
        const element = document.createElement(tag);
        element.muted = true;
        element.preload = "auto";
        element.src = url;
        element.load();
        prefetched.set(url, element);
      }
    }
    while (prefetched.size > PREFETCH_LIMIT) {
      const [url, element] = prefetched.entries().next().value;
      prefetched.delete(url);
      element.removeAttribute("src");
      element.load();
    }
  }

  // ---- The next pair, prepared ahead (docs/curators.md, "The next pair, prepared ahead") ----

  // Bytes of the next pair's video, audio and 3D models loaded before it is shown, in the
  // card's order: a part past the budget loads only its first segment (what its first frame
  // needs: preload "metadata"), a 3D model past it is fetched when shown.
  const PREPARE_BUDGET_BYTES = 32 * 1024 * 1024;
  const preparedDecks = new WeakMap(); // a prepared card -> its deck (null: nothing timed)

  async function sizeOf(url) {
    try {
      const response = await fetch(url, {method: "HEAD", credentials: "same-origin"});
      return response.ok ? parseInt(response.headers.get("Content-Length") || "", 10) : NaN;
    } catch (error) {
      return NaN;
    }
  }

  async function preloadWithin(card, budget) {
    const parts = Array.from(card.querySelectorAll("video[data-side], audio[data-side], [data-model3d][data-url]"));
    const urls = parts.map((part) => part.getAttribute("src") || part.getAttribute("data-url"));
    const sizes = await Promise.all(urls.map(sizeOf));
    let left = budget;
    parts.forEach((part, index) => {
      const size = sizes[index];
      const within = Number.isFinite(size) && size <= left;
      if (within) left -= size;
      if (part.hasAttribute("data-model3d")) {
        // Into the HTTP cache (the media answers are cacheable), where the viewer reads it.
        if (within) fetch(urls[index], {credentials: "same-origin"}).catch(() => undefined);
      } else {
        part.preload = within ? "auto" : "metadata";
      }
    });
  }

  // The next pair's card, not in the document yet: its players built (one clock, the
  // control bar) and its media loading within the budget.
  function prepare(card) {
    preparedDecks.set(card, build(card, true));
    return preloadWithin(card, PREPARE_BUDGET_BYTES);
  }

  // A prepared card is on screen now (``card``, in the document): its deck takes the keys and
  // plays at once, the two sides together; the card before it stops.
  function activate(card) {
    if (deck) {
      cancelAnimationFrame(deck.loop);
      deck.playing = false;
      for (const element of deck.media) element.pause();
    }
    deck = preparedDecks.has(card) ? preparedDecks.get(card) : build(card);
    preparedDecks.delete(card);
    if (!deck) return;
    for (const element of deck.media) element.preload = "auto";
    drawWaveforms(card, deck);
    startCountdown(card);
    play(deck);
  }

  window.arbiterPlayers = {prepare, activate};

  // ---- Wiring ----

  function setup(root) {
    if (deck) {
      cancelAnimationFrame(deck.loop);
      deck.playing = false;
    }
    deck = build(root);
    drawWaveforms(root, deck);
    startCountdown(root);
    prefetch(root);
  }

  function onKeydown(event) {
    if (!deck || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    if (isTyping(event.target) || document.querySelector("dialog[open]")) return;
    if (!KEYS.test(event.key) || !deck.root.isConnected) return;
    const key = event.key;
    if (key === " ") toggle(deck);
    else if (key === "," || key === ".") step(deck, key === "," ? -1 : 1);
    else if (key === "j" || key === "l") seek(deck, position(deck) + (key === "j" ? -1 : 1) * SEEK_SECONDS);
    else if (key === "-") changeSpeed(deck, -1, false);
    else if (key === "=" || key === "+") changeSpeed(deck, 1, false);
    else if (key === "i" || key === "o") setLoop(deck, key === "i" ? "in" : "out");
    else if (key === "c") clearLoop(deck);
    else if (key === "x") switchHeard(deck);
    else {
      const side = deck.sides[key === "[" ? 0 : 1];
      if (!side) return;
      deck.muted[side] = !deck.muted[side];
      applyMuting(deck);
      render(deck);
    }
    event.preventDefault(); // Space would press a focused button or scroll the page
  }

  document.addEventListener("keydown", onKeydown);
  document.addEventListener("click", onWaveformClick);
  document.addEventListener("DOMContentLoaded", () => setup(document.querySelector("main") || document.body));
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target instanceof HTMLElement && event.target.id === "workbench") setup(event.target);
  });
  window.addEventListener("resize", () => drawWaveforms(document, deck));
})();
