// 3D models on the pages that show a pair (the comparison page, the pair page, adjudication):
// each binary glTF drawn with the vendored three.js, every model on the page seen through
// one camera pose (orbit one, the others follow), with reset, wireframe and a turntable.
// Two responses made only of images (a 3D model's rendered views) are stepped together,
// the same view of each side by side. Keys: c reset, w wireframe, t turntable, j / l and
// i / k orbit, [ and ] the previous and next view. docs/import-format.md, "3D models".

const THREE_URL = "../vendor/three/three.module.min.js";
const LOADER_URL = "../vendor/three/addons/GLTFLoader.js";
const CONTROLS_URL = "../vendor/three/addons/OrbitControls.js";
// Each model is scaled to a bounding sphere of radius 1 around the origin, so one camera pose
// frames every model alike; the default pose looks at the front from a little right and above.
const HOME = { distance: 3.2, azimuth: Math.PI / 6, elevation: Math.PI / 9 };
const KEY_STEP = Math.PI / 12; // 15 degrees per key press
const TURNTABLE_STEP = (2 * Math.PI) / (12 * 60); // a full turn in about 12 s at 60 frames/s
const NO_WEBGL =
  "This browser cannot draw 3D here (WebGL is unavailable). The views rendered at import are shown below; the .glb can be downloaded.";

const viewers = [];
const grids = [];
const state = { wireframe: false, turntable: false };
let three = null;
let syncing = false;
let frameRequested = false;

function webglAvailable() {
  try {
    const canvas = document.createElement("canvas");
    return Boolean(canvas.getContext("webgl2") || canvas.getContext("webgl"));
  } catch (error) {
    return false;
  }
}

function loadThree() {
  if (!three) {
    const urls = [THREE_URL, LOADER_URL, CONTROLS_URL];
    three = Promise.all(urls.map((url) => import(url))).then(([THREE, loader, controls]) => ({
      THREE,
      GLTFLoader: loader.GLTFLoader,
      OrbitControls: controls.OrbitControls,
    }));
  }
  return three;
}

function setStatus(figure, message, problem) {
  const status = figure.querySelector("[data-model3d-status]");
  if (!status) return;
  status.textContent = message;
  status.classList.toggle("m3d-problem", Boolean(problem));
}

function showFallback(figure, message, stateName) {
  figure.setAttribute("data-model3d-state", stateName);
  setStatus(figure, message, true);
  const stage = figure.querySelector("[data-model3d-stage]");
  if (stage) stage.hidden = true;
  for (const button of figure.querySelectorAll("[data-model3d-action]")) button.disabled = true;
  const views = figure.querySelector("[data-model3d-views]");
  if (views) views.open = true;
}

async function setUp(figure) {
  figure.setAttribute("data-model3d-state", "loading");
  if (!webglAvailable()) {
    showFallback(figure, NO_WEBGL, "no-webgl");
    return;
  }
  let modules;
  try {
    modules = await loadThree();
  } catch (error) {
    showFallback(figure, "The 3D viewer could not be loaded.", "error");
    return;
  }
  const { THREE, GLTFLoader, OrbitControls } = modules;
  const stage = figure.querySelector("[data-model3d-stage]");
  let renderer;
  try {
    renderer = new THREE.WebGLRenderer({ antialias: true });
  } catch (error) {
    showFallback(figure, NO_WEBGL, "no-webgl");
    return;
  }
  renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
  renderer.setSize(stage.clientWidth || 300, stage.clientHeight || 300, false);
  stage.appendChild(renderer.domElement);
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xececec);
  // Lights only, no environment map: prefiltering one takes seconds in software WebGL, so
  // metallic surfaces (glTF's default metalness is 1) show darker than in a full viewer.
  scene.add(new THREE.HemisphereLight(0xffffff, 0x8a8a8a, 1.6));
  const camera = new THREE.PerspectiveCamera(40, 1, 0.01, 100);
  const headlight = new THREE.DirectionalLight(0xffffff, 1.8);
  headlight.position.set(-1, 2, 3); // above the camera's left, as in the rendered views
  camera.add(headlight);
  scene.add(camera);
  const controls = new OrbitControls(camera, renderer.domElement);
  const viewer = { figure, stage, renderer, scene, camera, controls, materials: [], THREE };
  viewer.resize = new ResizeObserver(() => resize(viewer));
  viewer.resize.observe(stage);
  resize(viewer);
  // A new viewer takes the pose of those already on the page.
  if (viewers.length) copyPose(viewers[0], viewer);
  else home(viewer);
  viewers.push(viewer);
  controls.addEventListener("change", () => follow(viewer));
  try {
    const loader = new GLTFLoader().register(embeddedTextures(THREE));
    const gltf = await loader.loadAsync(figure.getAttribute("data-url"));
    if (!viewers.includes(viewer)) return; // the page moved on while it loaded
    const model = gltf.scene;
    const box = new THREE.Box3().setFromObject(model);
    if (box.isEmpty()) throw new Error("the model has nothing to draw");
    const sphere = box.getBoundingSphere(new THREE.Sphere());
    const holder = new THREE.Group();
    model.position.sub(sphere.center);
    holder.add(model);
    holder.scale.setScalar(1 / (sphere.radius || 1));
    scene.add(holder);
    model.traverse((node) => {
      if (!node.isMesh) return;
      for (const material of [].concat(node.material)) viewer.materials.push(material);
    });
    applyWireframe(viewer);
    figure.setAttribute("data-model3d-state", "ready");
    setStatus(figure, "");
  } catch (error) {
    figure.setAttribute("data-model3d-state", "error");
    setStatus(figure, "The 3D model could not be loaded: " + (error && error.message ? error.message : "unreadable file") + ".", true);
  }
  requestFrame();
}

// A model's textures decoded from its own bytes: three.js would read each through a blob:
// URL, which the CSP (connect-src 'self') refuses. Imports refuse images in other files.
function embeddedTextures(THREE) {
  return (parser) => {
    parser.loadImageSource = function (sourceIndex) {
      if (parser.sourceCache[sourceIndex] === undefined) {
        const source = parser.json.images[sourceIndex];
        parser.sourceCache[sourceIndex] =
          source.bufferView === undefined
            ? Promise.reject(new Error(`image ${sourceIndex} is not inside the model`))
            : parser
                .getDependency("bufferView", source.bufferView)
                .then((bytes) =>
                  createImageBitmap(new Blob([bytes], { type: source.mimeType }), {
                    premultiplyAlpha: "none",
                  }),
                )
                .then((bitmap) => {
                  const texture = new THREE.Texture(bitmap);
                  texture.needsUpdate = true;
                  texture.userData.mimeType = source.mimeType;
                  return texture;
                });
      }
      return parser.sourceCache[sourceIndex].then((texture) => texture.clone());
    };
    return { name: "arbiter_embedded_textures" };
  };
}

function resize(viewer) {
  const width = viewer.stage.clientWidth || 300;
  const height = viewer.stage.clientHeight || 300;
  viewer.renderer.setSize(width, height, false);
  viewer.camera.aspect = width / height;
  viewer.camera.updateProjectionMatrix();
  requestFrame();
}

function home(viewer) {
  const { distance, azimuth, elevation } = HOME;
  viewer.controls.target.set(0, 0, 0);
  viewer.camera.position.set(
    distance * Math.cos(elevation) * Math.sin(azimuth),
    distance * Math.sin(elevation),
    distance * Math.cos(elevation) * Math.cos(azimuth),
  );
  viewer.camera.zoom = 1;
  viewer.camera.updateProjectionMatrix();
  viewer.controls.update();
}

function copyPose(from, to) {
  to.controls.target.copy(from.controls.target);
  to.camera.position.copy(from.camera.position);
  to.camera.zoom = from.camera.zoom;
  to.camera.updateProjectionMatrix();
  to.controls.update();
  // OrbitControls.update recomputes the position from its own angles: put back the exact one.
  to.camera.position.copy(from.camera.position);
  to.camera.quaternion.copy(from.camera.quaternion);
}

function follow(leader) {
  if (syncing) return;
  syncing = true;
  try {
    for (const other of viewers) if (other !== leader) copyPose(leader, other);
  } finally {
    syncing = false;
  }
  requestFrame();
}

function orbit(azimuth, elevation) {
  const leader = viewers[0];
  if (!leader) return false;
  const { THREE, camera, controls } = leader;
  const offset = camera.position.clone().sub(controls.target);
  const spherical = new THREE.Spherical().setFromVector3(offset);
  spherical.theta += azimuth;
  spherical.phi = Math.min(Math.PI - 0.05, Math.max(0.05, spherical.phi - elevation));
  offset.setFromSpherical(spherical);
  camera.position.copy(controls.target).add(offset);
  camera.lookAt(controls.target);
  controls.update(); // dispatches "change": the others follow
  return true;
}

function reset() {
  if (!viewers.length) return false;
  home(viewers[0]);
  follow(viewers[0]);
  return true;
}

function applyWireframe(viewer) {
  for (const material of viewer.materials) {
    material.wireframe = state.wireframe;
    material.needsUpdate = true;
  }
}

function setToggle(name, on) {
  if (!viewers.length) return false;
  state[name] = on;
  for (const button of document.querySelectorAll(`[data-model3d-action="${name}"]`)) {
    button.setAttribute("aria-pressed", on ? "true" : "false");
  }
  if (name === "wireframe") viewers.forEach(applyWireframe);
  requestFrame();
  return true;
}

function requestFrame() {
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(drawFrame);
}

function drawFrame() {
  frameRequested = false;
  if (state.turntable && viewers.length) orbit(TURNTABLE_STEP, 0);
  for (const viewer of viewers) viewer.renderer.render(viewer.scene, viewer.camera);
  if (state.turntable && viewers.length) requestFrame();
}

function tearDown(root) {
  for (const viewer of viewers.slice()) {
    if (!root.contains(viewer.figure)) continue;
    viewer.resize.disconnect();
    viewer.controls.dispose();
    viewer.renderer.dispose();
    viewer.renderer.forceContextLoss();
    viewers.splice(viewers.indexOf(viewer), 1);
  }
  for (const grid of grids.slice()) {
    if (root.contains(grid.container)) grids.splice(grids.indexOf(grid), 1);
  }
  if (!viewers.length) state.turntable = false;
}

// Rendered views: both responses made only of images, shown view k beside view k.

function imageFigures(section) {
  const parts = section.querySelector(".wb-parts");
  if (!parts) return null;
  const children = Array.from(parts.children);
  const images = children.every(
    (child) => child.matches("figure.wb-figure:not(.wb-media)") && child.querySelector("img"),
  );
  return images ? children : null;
}

function setUpGrid(container) {
  if (container.hasAttribute("data-views-grid")) return;
  const sections = Array.from(container.children).filter((child) => child.matches(".wb-response"));
  if (sections.length !== 2) return;
  const figures = sections.map(imageFigures);
  if (figures.some((list) => !list || list.length < 2)) return;
  container.setAttribute("data-views-grid", "");
  const count = Math.max(...figures.map((list) => list.length));
  const bar = document.createElement("div");
  bar.className = "m3d-step";
  bar.setAttribute("role", "group");
  bar.setAttribute("aria-label", "Views of both responses");
  bar.setAttribute("data-views-step", "");
  const previous = document.createElement("button");
  previous.type = "button";
  previous.setAttribute("data-views-action", "previous");
  previous.append("Previous view ", kbd("["));
  const label = document.createElement("span");
  label.className = "m3d-step-label";
  label.setAttribute("aria-live", "polite");
  label.setAttribute("data-views-label", "");
  const next = document.createElement("button");
  next.type = "button";
  next.setAttribute("data-views-action", "next");
  next.append("Next view ", kbd("]"));
  bar.append(previous, label, next);
  container.before(bar);
  const missing = sections.map((section) => {
    const note = document.createElement("p");
    note.className = "muted m3d-step-missing";
    note.hidden = true;
    section.querySelector(".wb-parts").append(note);
    return note;
  });
  const grid = { container, figures, missing, count, label, index: 0 };
  grids.push(grid);
  showView(grid, 0);
}

function kbd(text) {
  const element = document.createElement("kbd");
  element.textContent = text;
  return element;
}

function showView(grid, index) {
  grid.index = ((index % grid.count) + grid.count) % grid.count;
  grid.figures.forEach((list, side) => {
    list.forEach((figure, position) => {
      figure.hidden = position !== grid.index;
    });
    const note = grid.missing[side];
    note.hidden = grid.index < list.length;
    note.textContent = `This response has ${list.length} views, no view ${grid.index + 1}.`;
  });
  grid.label.textContent = `View ${grid.index + 1} of ${grid.count}`;
  grid.container.setAttribute("data-views-index", String(grid.index));
}

function stepViews(step) {
  if (!grids.length) return false;
  for (const grid of grids) showView(grid, grid.index + step);
  return true;
}

// Wiring.

function setUpAll(root) {
  for (const figure of root.querySelectorAll("[data-model3d]:not([data-model3d-state])")) setUp(figure);
  for (const container of root.querySelectorAll(".wb-responses")) setUpGrid(container);
  if (root.matches && root.matches(".wb-responses")) setUpGrid(root);
}

function isTyping(target) {
  return (
    target instanceof HTMLElement &&
    (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
  );
}

function handleKey(key) {
  switch (key) {
    case "c":
      return reset();
    case "w":
      return setToggle("wireframe", !state.wireframe);
    case "t":
      return setToggle("turntable", !state.turntable);
    case "j":
      return orbit(-KEY_STEP, 0);
    case "l":
      return orbit(KEY_STEP, 0);
    case "i":
      return orbit(0, KEY_STEP);
    case "k":
      return orbit(0, -KEY_STEP);
    case "[":
      return stepViews(-1);
    case "]":
      return stepViews(1);
    default:
      return false;
  }
}

document.addEventListener("keydown", (event) => {
  // On a page that also plays video or audio, the player's keys (j l i c [ ]) come first
  // (static/js/players.js handles them before this module loads and marks them handled).
  if (event.defaultPrevented) return;
  if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
  if (isTyping(event.target) || document.querySelector("dialog[open]")) return;
  if (handleKey(event.key)) event.preventDefault();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-model3d-action], [data-views-action]");
  if (!button) return;
  const action = button.getAttribute("data-model3d-action") || button.getAttribute("data-views-action");
  if (action === "reset") reset();
  else if (action === "wireframe") setToggle("wireframe", !state.wireframe);
  else if (action === "turntable") setToggle("turntable", !state.turntable);
  else if (action === "previous") stepViews(-1);
  else if (action === "next") stepViews(1);
});

document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.target instanceof HTMLElement) tearDown(event.detail.target);
});
// The next pair, prepared ahead, shown in place of the one answered (static/js/workbench.js).
document.addEventListener("arbiter:pairswap", (event) => {
  tearDown(event.detail.old);
  setUpAll(event.detail.card);
});
document.addEventListener("htmx:load", (event) => {
  if (event.detail.elt instanceof HTMLElement) setUpAll(event.detail.elt);
});
setUpAll(document);

// What the page shows, for its tests and for scripts: camera positions and targets, toggles.
window.arbiterModel3d = {
  cameras: () => viewers.map((viewer) => viewer.camera.position.toArray()),
  targets: () => viewers.map((viewer) => viewer.controls.target.toArray()),
  state: () => ({ ...state, viewers: viewers.length }),
  wireframes: () => viewers.map((viewer) => viewer.materials.map((material) => material.wireframe)),
  viewIndex: () => grids.map((grid) => grid.index),
};
