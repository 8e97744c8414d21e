// The image viewer of the comparison page: the left and right images (and an edit's input
// image) side by side, zoomed and panned together, with a flicker key that swaps left and
// right in place, and fit or natural-size modes. Keyboard-first; the keys are listed in the
// page's ? help. The mouse drags and wheels; on a touch screen one finger drags and two pinch.
// Also sizes the page's own images to fill their cards.
(function () {
  "use strict";

  const ZOOM_STEP = 1.25;
  const ZOOM_MIN = 0.1;
  const ZOOM_MAX = 64;
  const PAN_STEP = 0.1; // of the pane's width or height, per arrow key
  const WHEEL_ZOOM = 0.002; // per pixel of wheel movement
  const PAN_KEYS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

  // One view shared by every pane: zoom over the mode's base scale, and the image point
  // (as a share of its width and height) at the centre of each pane.
  const view = { natural: false, zoom: 1, cx: 0.5, cy: 0.5, swapped: false };
  let panes = []; // {side, url, element, image, label}
  // The pointers down on a pane (id -> client position), and where the gesture stood at its
  // last step: the point between the first two pointers, and how far apart they were.
  const pointers = new Map();
  let gesture = null; // {pane, x, y, spread}

  function dialog() {
    return document.querySelector("[data-viewer]");
  }

  function isOpen() {
    const element = dialog();
    return Boolean(element && element.open);
  }

  // Images enlarged past their natural size are drawn with hard pixel edges, not smoothed.
  function markEnlarged(image, scale) {
    image.classList.toggle("wb-pixelated", scale > 1.001);
  }

  // ---- The page's images: as large as their card allows (CSS caps the height) ----

  function fitPageImage(image) {
    if (!image.naturalWidth) return;
    const box = image.closest(".wb-figure");
    if (!box) return;
    image.style.width = "";
    image.style.height = "";
    const maxHeight = parseFloat(getComputedStyle(image).maxHeight) || Infinity;
    const scale = Math.min(box.clientWidth / image.naturalWidth, maxHeight / image.naturalHeight);
    image.style.width = `${Math.floor(image.naturalWidth * scale)}px`;
    image.style.height = `${Math.floor(image.naturalHeight * scale)}px`;
    markEnlarged(image, scale);
  }

  // The room an image may take: from the top of the first image in each column of the pair
  // (the responses side by side, and an edit's input beside them) down to the vote bar, so
  // that each column's first image shows in full with the choices; never below
  // MIN_IMAGE_HEIGHT, where a small window scrolls under the bar instead.
  const MIN_IMAGE_HEIGHT = 160;
  const ROOM_GAP = 16; // px between an image's frame and the bar

  function fitRoom() {
    const card = document.querySelector("[data-pair-card]");
    const decide = card && card.querySelector("[data-decide]");
    const left = card && card.querySelector(".wb-left");
    if (!decide || !left) return;
    const row = left.getBoundingClientRect().top;
    let top = 0;
    for (const column of card.querySelectorAll(".wb-prompt, .wb-response")) {
      const figure = column.querySelector(".wb-figure");
      if (!figure || Math.abs(column.getBoundingClientRect().top - row) > 1) continue;
      top = Math.max(top, figure.getBoundingClientRect().top + window.scrollY);
    }
    if (!top) return;
    const room = Math.floor(window.innerHeight - top - decide.offsetHeight - ROOM_GAP);
    card.style.setProperty("--wb-image-max", `${Math.max(MIN_IMAGE_HEIGHT, room)}px`);
  }

  function fitPageImages(root) {
    fitRoom();
    for (const image of (root || document).querySelectorAll(".wb-figure img")) {
      if (image.complete) fitPageImage(image);
      else image.addEventListener("load", () => fitPageImage(image), { once: true });
    }
  }

  // ---- The viewer ----

  function sideImages(side) {
    return Array.from(document.querySelectorAll(`[data-pair-card] img[data-side="${side}"]`));
  }

  function paneSpecs(index) {
    const specs = [];
    const input = sideImages("prompt")[0];
    if (input) specs.push({ side: "input", title: "Input", url: input.currentSrc || input.src });
    for (const side of ["left", "right"]) {
      const images = sideImages(side);
      const image = images[Math.min(index, images.length - 1)];
      if (image) specs.push({ side, title: side === "left" ? "Left" : "Right", url: image.src });
    }
    return specs;
  }

  function build(index) {
    const container = dialog().querySelector("[data-viewer-panes]");
    container.replaceChildren();
    panes = paneSpecs(index).map((spec) => {
      const element = document.createElement("div");
      element.className = `wb-pane wb-pane-${spec.side}`;
      element.setAttribute("data-pane", spec.side);
      const label = document.createElement("span");
      label.className = "wb-pane-label";
      const image = document.createElement("img");
      image.alt = "";
      image.draggable = false;
      image.addEventListener("load", render);
      element.append(image, label);
      container.append(element);
      return { ...spec, element, image, label };
    });
    container.setAttribute("data-count", String(panes.length));
  }

  // The left pane shows the right image and the other way round while flickered.
  function shown(pane) {
    if (!view.swapped || pane.side === "input") return pane;
    const other = panes.find((p) => p.side === (pane.side === "left" ? "right" : "left"));
    return other || pane;
  }

  function scaleOf(pane) {
    const image = pane.image;
    if (!image.naturalWidth) return 0;
    const base = view.natural
      ? 1
      : Math.min(
          pane.element.clientWidth / image.naturalWidth,
          pane.element.clientHeight / image.naturalHeight,
        );
    return base * view.zoom;
  }

  function render() {
    for (const pane of panes) {
      const source = shown(pane);
      if (pane.image.getAttribute("src") !== source.url) pane.image.src = source.url;
      pane.label.textContent = source.title + (source !== pane ? " (flickered)" : "");
      pane.element.classList.toggle("wb-flickered", source !== pane);
      const image = pane.image;
      const scale = scaleOf(pane);
      if (!scale) continue;
      const x = pane.element.clientWidth / 2 - view.cx * image.naturalWidth * scale;
      const y = pane.element.clientHeight / 2 - view.cy * image.naturalHeight * scale;
      image.style.transform = `translate(${x}px, ${y}px) scale(${scale})`;
      markEnlarged(image, scale);
    }
    const mode = dialog().querySelector("[data-viewer-mode]");
    const zoom = view.zoom === 1 ? "" : ` × ${view.zoom.toFixed(2)}`;
    mode.textContent = (view.natural ? "Natural size" : "Fit") + zoom;
  }

  function zoomBy(factor, pane, clientX, clientY) {
    const next = Math.min(ZOOM_MAX, Math.max(ZOOM_MIN, view.zoom * factor));
    if (pane && pane.image.naturalWidth) {
      // Keep the image point under the pointer where it is.
      const rect = pane.element.getBoundingClientRect();
      const mx = clientX - rect.left - rect.width / 2;
      const my = clientY - rect.top - rect.height / 2;
      const before = scaleOf(pane);
      const px = view.cx + mx / (pane.image.naturalWidth * before);
      const py = view.cy + my / (pane.image.naturalHeight * before);
      view.zoom = next;
      const after = scaleOf(pane);
      view.cx = px - mx / (pane.image.naturalWidth * after);
      view.cy = py - my / (pane.image.naturalHeight * after);
    } else {
      view.zoom = next;
    }
    render();
  }

  function panBy(dx, dy, pane) {
    const reference = pane || panes[0];
    const scale = reference ? scaleOf(reference) : 0;
    if (!scale) return;
    view.cx += dx / (reference.image.naturalWidth * scale);
    view.cy += dy / (reference.image.naturalHeight * scale);
    render();
  }

  function paneAt(target) {
    const element = target instanceof Element ? target.closest("[data-pane]") : null;
    return panes.find((pane) => pane.element === element);
  }

  function open(index) {
    const element = dialog();
    if (!element || element.open) return false;
    build(index || 0);
    if (!panes.length) return false;
    Object.assign(view, { natural: false, zoom: 1, cx: 0.5, cy: 0.5, swapped: false });
    pointers.clear();
    gesture = null;
    element.showModal();
    render();
    return true;
  }

  function onKeydown(event) {
    if (!isOpen() || event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    if (key === "+" || key === "=") zoomBy(ZOOM_STEP);
    else if (key === "-" || key === "_") zoomBy(1 / ZOOM_STEP);
    else if (key === "0") {
      view.natural = !view.natural;
      view.zoom = 1;
      render();
    } else if (key === "f") {
      view.swapped = !view.swapped;
      render();
    } else if (key === "z") dialog().close();
    else if (PAN_KEYS[key]) {
      const pane = panes[0];
      const [dx, dy] = PAN_KEYS[key];
      panBy(dx * PAN_STEP * pane.element.clientWidth, dy * PAN_STEP * pane.element.clientHeight);
    } else return;
    event.preventDefault();
    event.stopPropagation();
  }

  function onWheel(event) {
    const pane = paneAt(event.target);
    if (!pane) return;
    event.preventDefault(); // a trackpad's pinch arrives as a wheel event with ctrlKey
    zoomBy(Math.exp(-event.deltaY * WHEEL_ZOOM), pane, event.clientX, event.clientY);
  }

  // ---- Pointers: a mouse or one finger drags, two fingers pinch ----

  function gestureAt() {
    const points = Array.from(pointers.values()).slice(0, 2);
    const x = points.reduce((sum, point) => sum + point.x, 0) / points.length;
    const y = points.reduce((sum, point) => sum + point.y, 0) / points.length;
    const [a, b] = points;
    return { x, y, spread: b ? Math.hypot(a.x - b.x, a.y - b.y) : 0 };
  }

  function onPointerDown(event) {
    const pane = paneAt(event.target);
    if (!pane || event.button !== 0) return;
    pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
    pane.element.setPointerCapture(event.pointerId);
    // A second finger joins the gesture of the first, on the first one's pane.
    gesture = { pane: gesture ? gesture.pane : pane, ...gestureAt() };
    event.preventDefault();
  }

  function onPointerMove(event) {
    if (!gesture || !pointers.has(event.pointerId)) return;
    pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
    const now = gestureAt();
    // The picture follows the pointer (or the point between two fingers): the centre of the
    // view moves the other way. Two fingers also zoom by how much they spread apart, around
    // the point between them, so the image point under the fingers stays under them.
    panBy(gesture.x - now.x, gesture.y - now.y, gesture.pane);
    if (now.spread && gesture.spread) {
      zoomBy(now.spread / gesture.spread, gesture.pane, now.x, now.y);
    }
    Object.assign(gesture, now);
  }

  function onPointerUp(event) {
    pointers.delete(event.pointerId);
    // The fingers left go on from where they are: lifting one of two turns a pinch into a drag.
    gesture = pointers.size ? { pane: gesture.pane, ...gestureAt() } : null;
  }

  document.addEventListener("keydown", onKeydown, true);
  document.addEventListener("DOMContentLoaded", function () {
    const element = dialog();
    fitPageImages(document);
    if (!element) return;
    const container = element.querySelector("[data-viewer-panes]");
    container.addEventListener("wheel", onWheel, { passive: false });
    container.addEventListener("pointerdown", onPointerDown);
    container.addEventListener("pointermove", onPointerMove);
    container.addEventListener("pointerup", onPointerUp);
    container.addEventListener("pointercancel", onPointerUp);
  });
  window.addEventListener("resize", function () {
    fitPageImages(document);
    if (isOpen()) render();
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target instanceof HTMLElement && event.target.id === "workbench") {
      fitPageImages(event.target);
    }
  });
  document.addEventListener("arbiter:pairswap", function (event) {
    fitPageImages(event.detail.card);
  });

  window.arbiterViewer = { open, isOpen };
})();
