"""A project's audit log over REST (docs/api.md, "Audit log"): its events, newest first, a
page at a time, filtered as on the page. Curators of the project and operators; other members
get 403, outsiders 404."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers

from annotation.audit.access import get_audited_project
from annotation.audit.actions import ACTIONS
from annotation.audit.forms import AuditFilterForm
from annotation.audit.selectors import CSV_HEADER, audit_events
from annotation.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project_slug")
    actor = serializers.CharField(source="actor_label")
    target_id = serializers.CharField(source="target_ref")
    target = serializers.CharField(source="target_label")
    before = serializers.DictField()
    after = serializers.DictField()

    class Meta:
        model = AuditEvent
        fields = ("id", *CSV_HEADER)  # the CSV download's columns, and the event's id


@extend_schema(
    summary="A project's audit log, newest first",
    parameters=[
        OpenApiParameter("actor", str, description="Username of who made the change."),
        OpenApiParameter("action", enum=sorted(ACTIONS)),
        OpenApiParameter("since", str, description="First day, YYYY-MM-DD."),
        OpenApiParameter("until", str, description="Last day, YYYY-MM-DD."),
    ],
)
class AuditLogApi(generics.ListAPIView):
    serializer_class = AuditEventSerializer

    def get_queryset(self):
        project, _ = get_audited_project(self.request.user, self.kwargs["slug"])
        form = AuditFilterForm(self.request.query_params)
        if not form.is_valid():
            raise serializers.ValidationError(
                {field: [str(error) for error in errors] for field, errors in form.errors.items()}
            )
        return audit_events(project=project, filters=form.audit_filter())
