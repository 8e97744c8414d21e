"""Input serializers that refuse what they do not know (docs/api.md, "Errors"): a field the
endpoint does not take is a 400 naming it, not silently ignored, so a misspelt or
unsupported option (``out`` on a training) never looks accepted."""

from __future__ import annotations

from collections.abc import Mapping

from rest_framework import serializers


class StrictInputSerializer(serializers.Serializer):
    """A ``Serializer`` whose input may hold only its declared fields; each unknown one is
    refused with ``unknown_field_message``, formatted with the ``known`` fields."""

    unknown_field_message = "Unknown field; this endpoint takes: {known}."

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and (unknown := sorted(set(data) - set(self.fields))):
            message = self.unknown_field_message.format(known=", ".join(self.fields))
            raise serializers.ValidationError({name: [message] for name in unknown})
        return super().to_internal_value(data)
