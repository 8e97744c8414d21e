"""Password reset by email, with Django's views and tokens (docs/curators.md, "Accounts"): the
form's mail goes through the mail queue (``annotation.core.mail``) with a link on
``ARBITER_BASE_URL``. The answer is the same whether an account has the address or not, and
one client address or email may ask ``ARBITER_PASSWORD_RESETS_PER_HOUR`` times an hour."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm
from django.core.cache import cache
from django.template import loader

from annotation.accounts.login import refuse_without_local_passwords
from annotation.core.mail import mail_queue

LIMIT_WINDOW_S = 3600
TOO_MANY = "Too many password resets were asked for: try again in an hour."


class QueuedPasswordResetForm(PasswordResetForm):
    """Django's reset form, its message sent by the mail queue rather than in the request."""

    def send_mail(
        self,
        subject_template_name,
        email_template_name,
        context,
        from_email,
        to_email,
        html_email_template_name=None,
    ) -> None:
        context = {**context, "base_url": settings.ARBITER_BASE_URL}
        subject = loader.render_to_string(subject_template_name, context)
        body = loader.render_to_string(email_template_name, context)
        mail_queue(to=to_email, subject=subject, body=body)


def _over_limit(*names: str) -> bool:
    """Counts one request against each name; true when any is past the hourly limit."""
    over = False
    for name in names:
        key = "password-reset:" + hashlib.sha256(name.encode()).hexdigest()
        cache.add(key, 0, LIMIT_WINDOW_S)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, LIMIT_WINDOW_S)
            count = 1
        over = over or count > settings.ARBITER_PASSWORD_RESETS_PER_HOUR
    return over


class PasswordResetView(auth_views.PasswordResetView):
    form_class = QueuedPasswordResetForm
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def post(self, request, *args, **kwargs):
        return refuse_without_local_passwords(request) or super().post(request, *args, **kwargs)

    def form_valid(self, form):
        email = form.cleaned_data["email"].strip().lower()
        address = self.request.META.get("REMOTE_ADDR", "")
        if _over_limit(f"ip:{address}", f"email:{email}"):
            form.add_error(None, TOO_MANY)
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        return super().form_valid(form)
