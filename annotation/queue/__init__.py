"""The annotation queue: the serving order (claim SQL), the annotator's path (claim, vote, skip,
undo), the curators' levers on the queue (pausing, releasing leases), the blinded presentation,
the workbench and queue pages and the queue API; imports core, models, accounts, agreement,
decisions and pairs."""
