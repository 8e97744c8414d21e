"""Agreement: statistics (pure), the agreement report and its cache, prior ratings, the
Agreement and adjudication pages and API; imports core, models, charts and decisions."""
