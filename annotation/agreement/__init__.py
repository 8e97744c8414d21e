"""Agreement: statistics and consensus rules (pure), consensus and adjudication services, the
agreement report and its cache, prior ratings, the Agreement and adjudication pages and API;
imports core, models, charts, pairs and queue."""
