from __future__ import annotations

app_name = "judges"
urlpatterns: list = []
