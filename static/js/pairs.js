// The pairs browser: "All on this page" checks every pair row of the table. Delegated, so it
// keeps working after htmx swaps the results.
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.matches("[data-select-all]")) return;
  for (const row of document.querySelectorAll('input[name="pair"][form="bulk-form"]')) {
    row.checked = box.checked;
  }
});
