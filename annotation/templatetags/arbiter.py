from __future__ import annotations

from django import template

from annotation.core.markdown import render_markdown
from annotation.core.navigation import project_tabs

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str):
    return render_markdown(text)


@register.inclusion_tag("partials/project_nav.html", takes_context=True)
def project_nav(context, role: str | None = None) -> dict:
    """``{% project_nav %}``: the navigation of the context's ``project`` for its ``role``,
    or for the ``role`` given on pages that only one role reaches."""
    project = context["project"]
    role = role or context["role"]
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    return {
        "project": project,
        "role": role,
        "tabs": project_tabs(
            slug=project.slug,
            role=role,
            view_name=match.view_name if match else None,
            path=getattr(request, "path", None),
        ),
    }
