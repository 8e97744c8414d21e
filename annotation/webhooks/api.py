"""A project's webhooks over REST (docs/api.md, "Webhooks"; docs/webhooks.md): list and add
endpoints (the secret is in the answer to the POST and to Rotate only), change or remove one,
rotate its secret, send a test event, read its delivery log and redeliver. Curators of the
project; other members get 403, outsiders 404."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.strict import StrictInputSerializer
from annotation.models import SUBSCRIBABLE_EVENTS, WebhookEndpoint
from annotation.webhooks import selectors, services

_ENDPOINT_FIELDS = ("id", "url", "description", "events", "active", "created_at")


class EndpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = _ENDPOINT_FIELDS


class CreatedSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = (*_ENDPOINT_FIELDS, "secret")


class EndpointInput(StrictInputSerializer):
    unknown_field_message = "Not a webhook field (known: {known})."

    url = serializers.CharField(max_length=services.MAX_URL_CHARS)
    description = serializers.CharField(
        max_length=services.MAX_DESCRIPTION_CHARS, required=False, allow_blank=True
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=SUBSCRIBABLE_EVENTS), allow_empty=False
    )
    active = serializers.BooleanField(required=False)


class AttemptSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True)
    excerpt = serializers.CharField()


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    event = serializers.CharField(source="event.kind")
    webhook_id = serializers.CharField(source="event.msg_id")
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    log = AttemptSerializer(many=True, source="log.all")


def _endpoint(request, slug: str, pk: int) -> WebhookEndpoint:
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    return selectors.webhook_of_project(project=project, webhook_id=pk)


class WebhookListApi(APIView):
    @extend_schema(responses=EndpointSerializer(many=True), summary="A project's webhooks")
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        rows = selectors.project_webhooks(project=project)
        return ApiResponse(EndpointSerializer(rows, many=True).data)

    @extend_schema(
        request=EndpointInput,
        responses={201: CreatedSerializer},
        summary="Add a webhook; the answer holds its secret, shown this once",
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        given = EndpointInput(data=request.data)
        given.is_valid(raise_exception=True)
        endpoint = services.webhook_create(
            project=project, actor=request.user, **given.validated_data
        )
        return ApiResponse(CreatedSerializer(endpoint).data, status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    @extend_schema(responses=EndpointSerializer, summary="One webhook")
    def get(self, request, slug: str, pk: int):
        return ApiResponse(EndpointSerializer(_endpoint(request, slug, pk)).data)

    @extend_schema(request=EndpointInput, responses=EndpointSerializer, summary="Change a webhook")
    def patch(self, request, slug: str, pk: int):
        endpoint = _endpoint(request, slug, pk)
        given = EndpointInput(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        services.webhook_update(endpoint=endpoint, actor=request.user, **given.validated_data)
        return ApiResponse(EndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None}, summary="Remove a webhook and its log")
    def delete(self, request, slug: str, pk: int):
        services.webhook_delete(endpoint=_endpoint(request, slug, pk), actor=request.user)
        return ApiResponse(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateApi(APIView):
    @extend_schema(request=None, responses=CreatedSerializer, summary="Rotate the secret")
    def post(self, request, slug: str, pk: int):
        endpoint = _endpoint(request, slug, pk)
        services.webhook_secret_rotate(endpoint=endpoint, actor=request.user)
        return ApiResponse(CreatedSerializer(endpoint).data)


class WebhookTestApi(APIView):
    @extend_schema(
        request=None, responses={202: DeliverySerializer}, summary="Send a webhook.test event"
    )
    def post(self, request, slug: str, pk: int):
        delivery = services.webhook_test(endpoint=_endpoint(request, slug, pk))
        delivery.refresh_from_db()
        return ApiResponse(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookDeliveriesApi(APIView):
    @extend_schema(
        responses=DeliverySerializer(many=True), summary="The latest deliveries and attempts"
    )
    def get(self, request, slug: str, pk: int):
        log = selectors.webhook_log(endpoint=_endpoint(request, slug, pk))
        return ApiResponse(DeliverySerializer(log, many=True).data)


class WebhookRedeliverApi(APIView):
    @extend_schema(
        request=None, responses={202: DeliverySerializer}, summary="Send a delivery again"
    )
    def post(self, request, slug: str, pk: int, delivery_id: int):
        endpoint = _endpoint(request, slug, pk)
        delivery = selectors.delivery_of_webhook(endpoint=endpoint, delivery_id=delivery_id)
        services.webhook_redeliver(delivery=delivery)
        delivery.refresh_from_db()
        return ApiResponse(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
