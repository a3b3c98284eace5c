"""A Django project on skiplock's task backend, as the tests run it from a built wheel in a fresh venv."""

import os

import psycopg.conninfo

_db = psycopg.conninfo.conninfo_to_dict(os.environ["DATABASE_URL"])
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": _db.get("dbname", "postgres"),
                         "USER": _db.get("user", ""), "PASSWORD": _db.get("password", ""),
                         "HOST": _db.get("host", ""), "PORT": str(_db.get("port", ""))}}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "skiplock.django", "shop"]
TASKS = {
    "default": {
        "BACKEND": "skiplock.django.SkiplockBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {
            "max_attempts": 3,
            "backoff": {"base": 0.1, "cap": 0.5},
            "queues": {"emails": {"concurrency": 2}},
            "tasks": {"shop.tasks.declined": {"max_attempts": 2},
                      "shop.tasks.add": {"unique_key": "add-{0}-{1}"}},
        },
    }
}
SECRET_KEY = "skiplock-django-tasks-test"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
