"""Arbiter settings, read from the environment.

Every value comes through a small typed helper that fails loudly on a bad value. Development
(the default) needs nothing set: Arbiter's own PostgreSQL and a file-system Celery broker
under ``var/``.
Production (``ARBITER_ENV=production``) refuses to start without a secret key and hosts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.api_limits import (  # noqa: F401 - settings
    ARBITER_API_THROTTLE_ANNOTATE_RATE,
    ARBITER_API_THROTTLE_RATE,
    ARBITER_API_THROTTLE_REDIS_URL,
    ARBITER_API_TOKEN_DAYS,
    CACHES,
)
from config.env import env_bool, env_choice, env_int, env_list, env_str
from config.local_postgres import LocalServer
from config.logging import logging_config
from config.mail import mail_settings
from config.media_limits import (  # noqa: F401 - settings
    ARBITER_MAX_AUDIO_BYTES,
    ARBITER_MAX_AUDIO_SAMPLE_RATE,
    ARBITER_MAX_IMAGE_BYTES,
    ARBITER_MAX_IMAGE_FRAMES,
    ARBITER_MAX_IMAGE_PIXELS,
    ARBITER_MAX_MEDIA_SECONDS,
    ARBITER_MAX_MODEL3D_BYTES,
    ARBITER_MAX_MODEL3D_TRIANGLES,
    ARBITER_MAX_VIDEO_BYTES,
    ARBITER_MAX_VIDEO_FRAME_RATE,
    ARBITER_MAX_VIDEO_PIXELS,
    ARBITER_MEDIA_CPU_SECONDS,
    ARBITER_MEDIA_LIMITS,
    ARBITER_MEDIA_MEMORY_BYTES,
    ARBITER_MEDIA_THREADS,
    ARBITER_MEDIA_WALL_SECONDS,
    ARBITER_MEDIA_WORKERS,
)
from config.queues import TASK_ROUTES
from config.sso import *  # noqa: F403 - settings (docs/sso.md)

BASE_DIR = Path(__file__).resolve().parent.parent


ENVIRONMENT = env_str("ARBITER_ENV", "development")
if ENVIRONMENT not in {"development", "test", "production"}:
    raise ImproperlyConfigured(f"ARBITER_ENV={ENVIRONMENT!r}: use development, test or production")
PRODUCTION = ENVIRONMENT == "production"

# Off unless asked for, in every environment: Django's debug pages list every URL pattern on a
# 404 and the settings on a 500, so the demo shows the site's own error pages, as production
# does. DJANGO_DEBUG=1 brings the debug pages back for a developer (docs/operations.md).
DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production")
    SECRET_KEY = "insecure-development-key-never-use-in-production"

ALLOWED_HOSTS = env_list(
    "DJANGO_ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "testserver"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must be set in production")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

VAR_DIR = Path(env_str("ARBITER_VAR_DIR", str(BASE_DIR / "var")))

INSTALLED_APPS = [
    "config.apps.ArbiterAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: runserver leaves static files to WhiteNoise, in every mode.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "csp",
    "axes",
    *SSO_APPS,  # noqa: F405
    "annotation",
    "judges",
]

MIDDLEWARE = [
    # First and last: the request metrics (latency by view) time everything in between.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.logging.RequestLogMiddleware",
    "annotation.core.middleware.RequestAddressMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication (a curator may send more), and refusing in __call__, so before any
    # process_view: CsrfViewMiddleware reads request.POST there, and the view after it.
    "annotation.core.middleware.RequestBodyLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.csp.CSPMiddleware",  # django-csp's, the policy built once (config/csp.py)
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
    # After authentication and messages: a one-time password is changed before anything else.
    "annotation.accounts.password_change.PasswordChangeMiddleware",
    *SSO_MIDDLEWARE,  # noqa: F405
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

# WhiteNoise serves the static files in every mode: with DEBUG off, runserver (`make demo`)
# serves none. In production from collectstatic's folder; elsewhere from where they are
# written (the finders), a changed file served at once.
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
    "whitenoise.middleware.WhiteNoiseMiddleware",
)
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = not PRODUCTION

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",
            ],
        },
    }
]

# With no DATABASE_URL: Arbiter's own PostgreSQL under var/postgres, started by the first
# connection that needs it (config/local_postgres.py, docs/database.md). Production names its
# server.
ARBITER_LOCAL_POSTGRES: Path | None = None
_database_url = env_str("DATABASE_URL")
if _database_url is None:
    if PRODUCTION:
        raise ImproperlyConfigured("DATABASE_URL must be set in production")
    ARBITER_LOCAL_POSTGRES = VAR_DIR / "postgres"
    _database_url = LocalServer(ARBITER_LOCAL_POSTGRES).url()
if not _database_url.startswith(("postgres://", "postgresql://", "pgsql://")):
    raise ImproperlyConfigured(
        "DATABASE_URL must name a PostgreSQL server (postgres://user:pass@host:5432/db): "
        "Arbiter runs on PostgreSQL only (docs/database.md)"
    )
DATABASES = {
    "default": dj_database_url.parse(
        _database_url,
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60 if PRODUCTION else 0),
        # A persistent connection the server has dropped (a restart, a failover) is noticed
        # before the request uses it, instead of failing that request with a 500.
        conn_health_checks=True,
    )
}
# What stands between Arbiter and PostgreSQL (docs/database.md, "Behind PgBouncer"): `none`,
# or `transaction` for PgBouncer in transaction mode, where consecutive transactions of one
# Django connection may run on different server connections. Then nothing may outlive a
# transaction on the server: no SQL PREPARE (ARBITER_STATEMENT_PLANS below), no
# server-side cursor held open in autocommit (Django's WITH HOLD cursors for .iterator()),
# and no pool of Django's own in front of PgBouncer's. Session settings are never used,
# with or without a pooler (SET LOCAL inside the transaction; annotation/core/transaction.py).
ARBITER_DB_POOLER = env_choice("ARBITER_DB_POOLER", "none", ("none", "transaction"))
if ARBITER_DB_POOLER == "transaction":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    if DATABASES["default"].get("OPTIONS", {}).get("pool"):
        raise ImproperlyConfigured(
            "ARBITER_DB_POOLER=transaction: PgBouncer is the pool; DATABASE_URL must not ask "
            "for Django's own (pool=...)"
        )
# Protocol-level prepared statements (psycopg's prepare_threshold, with server-side
# binding), which PgBouncer 1.21+ keeps across server connections (max_prepared_statements)
# and 1.18 does not: unset, Django's default (none). docs/database.md has the figures.
_prepare_threshold = env_str("ARBITER_DB_PREPARE_THRESHOLD")
if _prepare_threshold is not None:
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        prepare_threshold=env_int("ARBITER_DB_PREPARE_THRESHOLD", 0), server_side_binding=True
    )
# Django's, skipping the health check on a connection that answered a moment ago, and
# starting the local server when there is one to start.
DATABASES["default"]["ENGINE"] = "config.postgresql"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if ENVIRONMENT == "test":
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Media is never served by URL from this folder: annotation.media.views checks membership.
MEDIA_ROOT = Path(env_str("ARBITER_MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "/media-files-are-not-public/"
# After the membership check, hand the bytes to the web server instead of streaming them from
# Django (docs/operations.md, "Media through the web server"): nginx gets X-Accel-Redirect to
# the internal location ARBITER_MEDIA_ACCEL_PREFIX, Apache and lighttpd get X-Sendfile.
# The modes are annotation.core.downloads.HAND_OFF_MODES; settings import no app code.
ARBITER_MEDIA_ACCEL = env_choice("ARBITER_MEDIA_ACCEL", "off", ("off", "nginx", "apache"))
ARBITER_MEDIA_ACCEL_PREFIX = env_str("ARBITER_MEDIA_ACCEL_PREFIX", "/internal-media/")
if not (ARBITER_MEDIA_ACCEL_PREFIX.startswith("/") and ARBITER_MEDIA_ACCEL_PREFIX.endswith("/")):
    raise ImproperlyConfigured(
        f"ARBITER_MEDIA_ACCEL_PREFIX={ARBITER_MEDIA_ACCEL_PREFIX!r} must start and end with /"
    )

# Where Arbiter keeps every file it writes (annotation/core/storage.py, docs/operations.md,
# "Object storage"): the local folders below (the default: a laptop and the demo need nothing
# more), or an S3-compatible bucket, each area under ARBITER_S3_PREFIX/<area>/. Credentials are
# boto3's own variables; left empty, boto3 looks further (an instance role, ~/.aws).
ARBITER_STORAGE = env_choice("ARBITER_STORAGE", "local", ("local", "s3"))
ARBITER_S3_BUCKET = env_str("ARBITER_S3_BUCKET", "")
ARBITER_S3_ENDPOINT_URL = env_str("ARBITER_S3_ENDPOINT_URL", "")  # empty: AWS itself
ARBITER_S3_PREFIX = env_str("ARBITER_S3_PREFIX", "").strip("/")
AWS_ACCESS_KEY_ID = env_str("AWS_ACCESS_KEY_ID", "")
AWS_SECRET_ACCESS_KEY = env_str("AWS_SECRET_ACCESS_KEY", "")
AWS_DEFAULT_REGION = env_str("AWS_DEFAULT_REGION", "us-east-1")
# Media objects are named by an HMAC of their content hash under this secret: never changed
# once media is stored (a new one names other objects). Defaults to SECRET_KEY.
ARBITER_STORAGE_KEY_SECRET = env_str("ARBITER_STORAGE_KEY_SECRET", "") or SECRET_KEY
if ARBITER_STORAGE == "s3" and not ARBITER_S3_BUCKET:
    raise ImproperlyConfigured("ARBITER_STORAGE=s3 needs ARBITER_S3_BUCKET")
if ARBITER_STORAGE == "s3" and ARBITER_MEDIA_ACCEL == "apache":
    raise ImproperlyConfigured(
        "ARBITER_MEDIA_ACCEL=apache sends files from disk; with ARBITER_STORAGE=s3 use nginx or off"
    )

# Request bodies (annotation/core/middleware.py, docs/operations.md "Request body limits"): any
# request may declare at most ARBITER_MAX_REQUEST_BYTES; only a project's curators may send up
# to ARBITER_MAX_UPLOAD_BYTES, and only to its import endpoints. Form fields and JSON bodies
# (DATA_UPLOAD_MAX_MEMORY_SIZE, which leaves out file parts) fit within the request limit.
ARBITER_MAX_REQUEST_BYTES = env_int("ARBITER_MAX_REQUEST_BYTES", 1024 * 1024)
ARBITER_MAX_UPLOAD_BYTES = env_int("ARBITER_MAX_UPLOAD_BYTES", 2 * 1024**3)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ARBITER_MAX_FORM_BYTES", ARBITER_MAX_REQUEST_BYTES)
# With ARBITER_STORAGE=s3 (docs/curators.md, "Large files straight to the bucket"): the size
# of the parts the import page sends to the bucket, and how long each presigned URL (a part's
# upload, a researcher's release download) stays good.
ARBITER_UPLOAD_PART_BYTES = env_int("ARBITER_UPLOAD_PART_BYTES", 16 * 1024**2)
ARBITER_PRESIGNED_UPLOAD_S = env_int("ARBITER_PRESIGNED_UPLOAD_S", 3600)
ARBITER_PRESIGNED_DOWNLOAD_S = env_int("ARBITER_PRESIGNED_DOWNLOAD_S", 300)
# The bucket's prefix under which curators name the prefixes they import from (never one of
# Arbiter's own areas; docs/curators.md, "Importing from the bucket").
ARBITER_S3_IMPORT_ROOT = env_str("ARBITER_S3_IMPORT_ROOT", "imports")
if ARBITER_MAX_REQUEST_BYTES > ARBITER_MAX_UPLOAD_BYTES:
    raise ImproperlyConfigured(
        f"ARBITER_MAX_REQUEST_BYTES={ARBITER_MAX_REQUEST_BYTES} is larger than "
        f"ARBITER_MAX_UPLOAD_BYTES={ARBITER_MAX_UPLOAD_BYTES}"
    )
if DATA_UPLOAD_MAX_MEMORY_SIZE > ARBITER_MAX_REQUEST_BYTES:
    raise ImproperlyConfigured(
        f"ARBITER_MAX_FORM_BYTES={DATA_UPLOAD_MAX_MEMORY_SIZE} is larger than "
        f"ARBITER_MAX_REQUEST_BYTES={ARBITER_MAX_REQUEST_BYTES}, which refuses such bodies first"
    )
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
ARBITER_FETCH_TIMEOUT_S = env_int("ARBITER_FETCH_TIMEOUT_S", 10)
ARBITER_FETCH_MAX_REDIRECTS = env_int("ARBITER_FETCH_MAX_REDIRECTS", 3)
# Uploads larger than this are imported by a Celery task with a progress bar.
ARBITER_SYNC_IMPORT_MAX_BYTES = env_int("ARBITER_SYNC_IMPORT_MAX_BYTES", 2 * 1024 * 1024)

# Security
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads no cookie, but the API docs page does
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    # Load balancers and Prometheus ask a node directly, on the internal network, in plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'", *SSO_FORM_ACTIONS],  # noqa: F405
        "frame-ancestors": ["'none'"],
    }
}

# Who may create a project on the home page (docs/operations.md, "Accounts and projects"):
# "curators" (anyone who curates a project, and operators) or "operators" (staff only).
ARBITER_PROJECT_CREATORS = env_str("ARBITER_PROJECT_CREATORS", "curators")
if ARBITER_PROJECT_CREATORS not in {"curators", "operators"}:
    raise ImproperlyConfigured(
        f"ARBITER_PROJECT_CREATORS={ARBITER_PROJECT_CREATORS!r}: use curators or operators"
    )

# Mail (config/mail.py, docs/operations.md "Mail"): SMTP from ARBITER_EMAIL_URL, sent by the
# `mail` queue's worker; an invitation's link works for ARBITER_INVITATION_DAYS days, once.
_mail = mail_settings(
    url=env_str("ARBITER_EMAIL_URL", ""),
    sender=env_str("ARBITER_EMAIL_FROM", ""),
    base_url=env_str("ARBITER_BASE_URL", ""),
    production=PRODUCTION,
)
globals().update(_mail.email)
DEFAULT_FROM_EMAIL: str = _mail.sender
ARBITER_BASE_URL: str = _mail.base_url
ARBITER_INVITATION_DAYS = env_int("ARBITER_INVITATION_DAYS", 7)
# Password-reset requests one address may make per hour (the answer never says whether an
# account has the email); the login's lockout is django-axes'.
ARBITER_PASSWORD_RESETS_PER_HOUR = env_int("ARBITER_PASSWORD_RESETS_PER_HOUR", 5)
if ARBITER_INVITATION_DAYS < 1 or ARBITER_PASSWORD_RESETS_PER_HOUR < 1:
    raise ImproperlyConfigured(
        "ARBITER_INVITATION_DAYS and ARBITER_PASSWORD_RESETS_PER_HOUR must be at least 1"
    )

AXES_FAILURE_LIMIT = env_int("ARBITER_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_int("ARBITER_LOGIN_COOLOFF_MINUTES", 15) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotation.accounts.authentication.PreparedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "config.api_schema.ArbiterAutoSchema",
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    # One JSON reading for every endpoint: orjson, a depth limit, no NUL (config/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "config.parsers.JsonParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "config.pagination.Pagination",
    # Per-token rates (config/throttling.py, docs/api.md "Rate limits"); the annotator's
    # claim, vote, skip and undo are counted by their own class.
    "DEFAULT_THROTTLE_CLASSES": ["config.throttling.ApiTokenThrottle"],
    "PAGE_SIZE": 100,
    "DEFAULT_RENDERER_CLASSES": (
        ["rest_framework.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"]
        if DEBUG
        else ["rest_framework.renderers.JSONRenderer"]
    ),
}


SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Projects, pairs, imports, the annotation queue and judges.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "SideEnum": "annotation.models.Side",
        "PairStatusEnum": "annotation.models.PairStatus",
        "FilterRunStatusEnum": "judges.models.FilterRun.Status",
        "ReleaseStatusEnum": "annotation.models.Release.Status",
        "TrainingRunStatusEnum": "judges.models.TrainingRun.Status",
    },
}

# Celery: a broker that needs no server by default (kombu's file-system transport).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "celery-broker"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_S", 3600)}
# Tests run tasks inline unless a test starts a real worker (tests/celery_worker.py).
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", ENVIRONMENT == "test")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Each kind of work on a queue of its own (config/queues.py, docs/deploy.md); a task missing
# from the routes would go to "default", which no worker serves: a test walks every task.
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = TASK_ROUTES
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Judge filter runs (judges/runs/services.py, docs/judges-runs.md): pairs per batch task, and
# transient judge failures (429, 5xx, timeouts) retried with exponential backoff and jitter.
ARBITER_JUDGE_BATCH_PAIRS = env_int("ARBITER_JUDGE_BATCH_PAIRS", 50)
ARBITER_JUDGE_MAX_ATTEMPTS = env_int("ARBITER_JUDGE_MAX_ATTEMPTS", 5)
ARBITER_JUDGE_RETRY_BASE_MS = env_int("ARBITER_JUDGE_RETRY_BASE_MS", 2000)
ARBITER_JUDGE_RETRY_CAP_MS = env_int("ARBITER_JUDGE_RETRY_CAP_MS", 60_000)
# Judges (docs/judges.md): an openai judge's api_key_env must match this glob (fnmatchcase),
# so a judge can never make a worker send DJANGO_SECRET_KEY or a database password anywhere;
# reward-model checkpoints are read only from under this folder.
ARBITER_JUDGE_KEY_ENV_PATTERN = env_str("ARBITER_JUDGE_KEY_ENV_PATTERN", "ARBITER_JUDGE_KEY_*")
ARBITER_CHECKPOINT_ROOT = Path(env_str("ARBITER_CHECKPOINT_ROOT", str(VAR_DIR / "checkpoints")))
# The largest audio clip an openai judge is sent as an input_audio part (bytes before base64).
ARBITER_JUDGE_MAX_AUDIO_BYTES = env_int("ARBITER_JUDGE_MAX_AUDIO_BYTES", 20 * 1024 * 1024)
# Releases (docs/releases.md): each built release is a folder and a .tar.gz under this one,
# ``<slug>/<version>/`` and ``<slug>/<slug>-<version>.tar.gz``; shared by web and workers.
ARBITER_RELEASE_ROOT = Path(env_str("ARBITER_RELEASE_ROOT", str(VAR_DIR / "releases")))
# A filter run (or an evaluation, training or import) with no progress for this long is
# resumed by the periodic task (docs/operations.md: run one `celery -A config beat`), which
# runs every ARBITER_RESUME_STALLED_EVERY_S; the run page offers Resume after the same time.
ARBITER_STALLED_AFTER_S = env_int("ARBITER_STALLED_AFTER_S", 600)
ARBITER_RESUME_STALLED_EVERY_S = env_int("ARBITER_RESUME_STALLED_EVERY_S", 60)
# How the hot path's hand-written statements are planned once rather than on every call
# (annotation/core/prepared.py): `prepare`, SQL PREPARE once per connection; `functions`, each
# kept as a PL/pgSQL function whose plan PostgreSQL caches per server connection, the only way
# behind PgBouncer in transaction mode, whose server connections change under a client between
# transactions; `none`, planned on every call.
if "ARBITER_PREPARED_STATEMENTS" in os.environ:
    raise ImproperlyConfigured(
        "ARBITER_PREPARED_STATEMENTS is now ARBITER_STATEMENT_PLANS: prepare (was true), "
        "none (was false), or functions (behind PgBouncer in transaction mode)"
    )
ARBITER_STATEMENT_PLANS = env_choice(
    "ARBITER_STATEMENT_PLANS",
    "functions" if ARBITER_DB_POOLER == "transaction" else "prepare",
    ("prepare", "functions", "none"),
)
if ARBITER_STATEMENT_PLANS == "prepare" and ARBITER_DB_POOLER == "transaction":
    raise ImproperlyConfigured(
        "ARBITER_STATEMENT_PLANS=prepare with ARBITER_DB_POOLER=transaction: a statement "
        "prepared with SQL PREPARE lives on one server connection, and PgBouncer hands the "
        "next transaction another; leave ARBITER_STATEMENT_PLANS unset (functions)"
    )

# Agreement reports (annotation/agreement/services.py, docs/agreement.md "The report"):
# after a vote, a cached report is refreshed once this many seconds have passed, by one task
# for all the votes of that window.
ARBITER_AGREEMENT_DEBOUNCE_S = env_int("ARBITER_AGREEMENT_DEBOUNCE_S", 30)
if ARBITER_AGREEMENT_DEBOUNCE_S < 0:
    raise ImproperlyConfigured(
        f"ARBITER_AGREEMENT_DEBOUNCE_S={ARBITER_AGREEMENT_DEBOUNCE_S} must not be negative"
    )
# Webhooks (docs/webhooks.md, "Settings"): private targets refused unless allowed; the
# timeout of a request; the first retry's wait, doubling to its cap; the retry window; the sweep.
ARBITER_WEBHOOK_ALLOW_PRIVATE = env_bool("ARBITER_WEBHOOK_ALLOW_PRIVATE", False)
ARBITER_WEBHOOK_TIMEOUT_S = env_int("ARBITER_WEBHOOK_TIMEOUT_S", 5)
ARBITER_WEBHOOK_BACKOFF_S = env_int("ARBITER_WEBHOOK_BACKOFF_S", 30)
ARBITER_WEBHOOK_BACKOFF_MAX_S = env_int("ARBITER_WEBHOOK_BACKOFF_MAX_S", 3600)
ARBITER_WEBHOOK_RETRY_FOR_S = env_int("ARBITER_WEBHOOK_RETRY_FOR_S", 24 * 3600)
ARBITER_WEBHOOK_SWEEP_EVERY_S = env_int("ARBITER_WEBHOOK_SWEEP_EVERY_S", 10)
if min(ARBITER_WEBHOOK_TIMEOUT_S, ARBITER_WEBHOOK_SWEEP_EVERY_S) < 1:
    raise ImproperlyConfigured("ARBITER_WEBHOOK_TIMEOUT_S and _SWEEP_EVERY_S must be at least 1")
CELERY_BEAT_SCHEDULE = {
    name: {
        "task": task,
        "schedule": ARBITER_RESUME_STALLED_EVERY_S,
        # A sweep nobody took before the next one is due is dropped, not piled up.
        "options": {"expires": ARBITER_RESUME_STALLED_EVERY_S},
    }
    for name, task in (
        ("resume-stalled-filter-runs", "judges.filter_runs_resume_stalled"),
        ("resume-stalled-judge-evaluations", "judges.judge_evaluations_resume_stalled"),
        ("resume-stalled-trainings", "judges.training_runs_resume_stalled"),
        ("resume-stalled-imports", "annotation.imports_resume_stalled"),
        ("fail-stalled-release-builds", "annotation.release_builds_fail_stalled"),
        ("send-lost-agreement-refreshes", "annotation.agreement_refreshes_send_lost"),
    )
}
CELERY_BEAT_SCHEDULE["send-due-webhooks"] = {
    "task": "annotation.webhooks_deliver_due",
    "schedule": ARBITER_WEBHOOK_SWEEP_EVERY_S,
    "options": {"expires": ARBITER_WEBHOOK_SWEEP_EVERY_S},
}
# Time limits of the Celery tasks, by kind of job (docs/operations.md, "Time limits,
# attempts and quarantine"): the soft limit raises inside the task, which records the failure
# on its job; ARBITER_TASK_KILL_AFTER_S later the worker kills the process. Both stay below
# the broker's visibility timeout, so a running task is never handed to a second worker.
ARBITER_TASK_TIME_LIMITS: dict[str, tuple[int, str]] = {
    kind: (env_int(name, default), name)
    for kind, name, default in (
        ("import", "ARBITER_IMPORT_TIME_LIMIT_S", 1800),
        ("release build", "ARBITER_RELEASE_TIME_LIMIT_S", 1800),
        ("agreement refresh", "ARBITER_AGREEMENT_TIME_LIMIT_S", 600),
        # one batch of a filter run or an evaluation (ARBITER_JUDGE_BATCH_PAIRS pairs)
        ("filter run", "ARBITER_FILTER_RUN_TIME_LIMIT_S", 1800),
        ("evaluation", "ARBITER_EVALUATION_TIME_LIMIT_S", 1800),
        ("training", "ARBITER_TRAINING_TIME_LIMIT_S", 3000),
        ("sweep", "ARBITER_SWEEP_TIME_LIMIT_S", 120),
        ("mail", "ARBITER_MAIL_TIME_LIMIT_S", 120),
    )
}
ARBITER_TASK_KILL_AFTER_S = env_int("ARBITER_TASK_KILL_AFTER_S", 60)
# A job whose task started this many times without finishing (its worker was killed, by
# the kernel for memory or by hand) is quarantined: failed, and never sent again.
ARBITER_JOB_MAX_ATTEMPTS = env_int("ARBITER_JOB_MAX_ATTEMPTS", 2)
# An import whose project's lock is held by another import is sent again after this long.
ARBITER_IMPORT_BUSY_RETRY_S = env_int("ARBITER_IMPORT_BUSY_RETRY_S", 5)
for _kind, (_limit, _name) in ARBITER_TASK_TIME_LIMITS.items():
    if _limit <= 0:
        raise ImproperlyConfigured(f"{_name}={_limit}: a time limit must be positive")
if ARBITER_TASK_KILL_AFTER_S <= 0 or ARBITER_JOB_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured(
        "ARBITER_TASK_KILL_AFTER_S must be positive and ARBITER_JOB_MAX_ATTEMPTS at least 1"
    )
if "visibility_timeout" in CELERY_BROKER_TRANSPORT_OPTIONS:
    _visibility = CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    for _kind, (_limit, _name) in ARBITER_TASK_TIME_LIMITS.items():
        if _limit + ARBITER_TASK_KILL_AFTER_S >= _visibility:
            raise ImproperlyConfigured(
                f"{_name}={_limit} plus ARBITER_TASK_KILL_AFTER_S={ARBITER_TASK_KILL_AFTER_S} "
                f"reaches the broker's visibility timeout (CELERY_VISIBILITY_S={_visibility}): "
                f"a {_kind} still running would be handed to a second worker; raise "
                "CELERY_VISIBILITY_S or lower the limit"
            )

if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A killed worker's unacknowledged tasks return to the queue once the visibility timeout
    # has passed; sweep for them that often (kombu's default sweep runs every 100 s).
    CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_interval"] = max(
        1, min(10, CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"])
    )
    CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_throttle"] = 1
    # A broker host that does not answer fails a publish in seconds instead of hanging a request.
    CELERY_BROKER_TRANSPORT_OPTIONS["socket_connect_timeout"] = env_int(
        "CELERY_BROKER_CONNECT_TIMEOUT_S", 5
    )

# /metrics (config/metrics.py, docs/deploy.md "Metrics"): served only with this bearer
# token (off without it). Processes that share a node count together in
# PROMETHEUS_MULTIPROC_DIR (gunicorn's workers, a Celery worker's pool), a folder emptied
# before they start; a Celery worker node serves its jobs' metrics on its own port.
ARBITER_METRICS_TOKEN = env_str("ARBITER_METRICS_TOKEN", "")
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR and not Path(PROMETHEUS_MULTIPROC_DIR).is_dir():
    raise ImproperlyConfigured(
        f"PROMETHEUS_MULTIPROC_DIR={PROMETHEUS_MULTIPROC_DIR!r} is not a folder: make it (empty) "
        "before the processes start"
    )
ARBITER_WORKER_METRICS_PORT = env_int("ARBITER_WORKER_METRICS_PORT", 0)
ARBITER_WORKER_METRICS_ADDRESS = env_str("ARBITER_WORKER_METRICS_ADDRESS", "127.0.0.1")
if ARBITER_WORKER_METRICS_PORT and not PROMETHEUS_MULTIPROC_DIR:
    raise ImproperlyConfigured(
        "ARBITER_WORKER_METRICS_PORT needs PROMETHEUS_MULTIPROC_DIR: a worker's jobs run in its "
        "pool's processes, which count there"
    )
# /readyz (config/health.py): how long each of its checks may take.
ARBITER_READY_TIMEOUT_S = env_int("ARBITER_READY_TIMEOUT_S", 2)

LOG_LEVEL = env_str("ARBITER_LOG_LEVEL", "INFO")
# One JSON object a line, each with the id of the request it was written for (config/logging.py).
LOGGING = logging_config(LOG_LEVEL)
