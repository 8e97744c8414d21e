"""The annotation queue: the serving order (claim key, claim SQL), the annotator's path (claim,
vote, skip, undo), the curators' levers, the blinded presentation, the workbench and queue pages
and the queue API; imports core, models, accounts, agreement,
decisions, pairs and projects."""
