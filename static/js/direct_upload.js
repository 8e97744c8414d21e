// The import page's uploads straight to the bucket (docs/curators.md, "Large files straight
// to the bucket"): each file is sent in parts to presigned URLs the server hands out, a failed
// part is tried again, and a page reloaded during an upload resumes it: the upload's token is
// kept in this browser's storage, and the parts the bucket already holds are not sent again.
// Once every file is complete the import job starts from the stored files.
(() => {
  const form = document.querySelector("[data-direct-upload]");
  if (!form) return;
  const uploads = form.dataset.uploads; // the upload API: start, part-urls/, parts/, complete/
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const status = form.querySelector("[data-upload-status]");
  const bar = form.querySelector("progress");
  const button = form.querySelector("button[type=submit]");
  const TRIES = 4; // a part's tries before the upload stops (it can be resumed)
  const PARALLEL = 3; // parts in flight at once
  const URL_BATCH = 20; // presigned URLs asked for at once

  const say = (text) => {
    status.textContent = text;
  };
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function call(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    });
    const data = response.status === 204 ? {} : await response.json();
    if (!response.ok) {
      const detail = data.detail || Object.values(data).flat().join(" ");
      throw new Error(detail || `The server answered ${response.status}.`);
    }
    return data;
  }

  const savedKey = (field, file) =>
    `arbiter-upload:${uploads}:${field}:${file.name}:${file.size}:${file.lastModified}`;

  // The upload started earlier for this very file, with the parts the bucket holds; or a new one.
  async function startOrResume(field, file) {
    const key = savedKey(field, file);
    const saved = JSON.parse(localStorage.getItem(key) || "null");
    if (saved) {
      try {
        const listed = await call(`${uploads}parts/`, { token: saved.token });
        const whole = (n) => Math.min(saved.part_bytes, file.size - (n - 1) * saved.part_bytes);
        const done = listed.parts.filter((p) => p.size === whole(p.number)).map((p) => p.number);
        return { upload: saved, done: new Set(done), key };
      } catch (error) {
        localStorage.removeItem(key); // completed, expired or aborted: start afresh
      }
    }
    const upload = await call(uploads, { field, filename: file.name, size: file.size });
    localStorage.setItem(key, JSON.stringify(upload));
    return { upload, done: new Set(), key };
  }

  async function putPart(url, blob) {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const response = await fetch(url, { method: "PUT", body: blob });
        if (response.ok) return;
        if (attempt >= TRIES) throw new Error(`the bucket answered ${response.status}`);
      } catch (error) {
        if (attempt >= TRIES) throw error;
      }
      await pause(250 * 2 ** attempt);
    }
  }

  async function sendFile(field, file, progress) {
    const { upload, done, key } = await startOrResume(field, file);
    const size = (n) => Math.min(upload.part_bytes, file.size - (n - 1) * upload.part_bytes);
    for (const n of done) progress(size(n));
    const missing = [];
    for (let n = 1; n <= upload.part_count; n += 1) if (!done.has(n)) missing.push(n);
    while (missing.length) {
      const batch = missing.splice(0, URL_BATCH);
      const { urls } = await call(`${uploads}part-urls/`, { token: upload.token, numbers: batch });
      const queue = [...batch];
      const worker = async () => {
        for (let n = queue.shift(); n !== undefined; n = queue.shift()) {
          const start = (n - 1) * upload.part_bytes;
          await putPart(urls[String(n)], file.slice(start, start + size(n)));
          progress(size(n));
        }
      };
      await Promise.all(Array.from({ length: PARALLEL }, worker));
    }
    await call(`${uploads}complete/`, { token: upload.token });
    return { token: upload.token, key };
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const files = [...form.querySelectorAll("input[type=file][data-field]")]
      .filter((input) => input.files.length)
      .map((input) => ({ field: input.dataset.field, file: input.files[0] }));
    if (!files.some(({ field }) => field === "file")) {
      say("Choose the pairs file.");
      return;
    }
    const total = files.reduce((sum, { file }) => sum + file.size, 0);
    let sent = 0;
    bar.max = total;
    bar.value = 0;
    bar.hidden = false;
    button.disabled = true;
    try {
      const tokens = {};
      const saved = [];
      for (const { field, file } of files) {
        say(`Uploading ${file.name}…`);
        const { token, key } = await sendFile(field, file, (bytes) => {
          sent += bytes;
          bar.value = sent;
        });
        tokens[field] = token;
        saved.push(key);
      }
      say("Starting the import…");
      const job = await call(form.dataset.start, tokens);
      for (const key of saved) localStorage.removeItem(key);
      window.location.assign(`${form.dataset.jobs}?job=${job.id}`);
    } catch (error) {
      say(`The upload stopped: ${error.message} Choose the same file again to resume it.`);
      button.disabled = false;
    }
  });
})();
