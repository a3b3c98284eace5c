"""The least Django needs to hand out a PostgreSQL connection (tests/integration/test_user_transaction.py).

No project folder, no apps: DATABASE_URL (set by the db_url fixture before Django is set up) names
the test database.
"""

import os

import psycopg.conninfo

_info = psycopg.conninfo.conninfo_to_dict(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1/postgres"))

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _info.get("dbname", "postgres"),
        "USER": _info.get("user", "postgres"),
        "PASSWORD": _info.get("password", ""),
        "HOST": _info.get("host", "127.0.0.1"),
        "PORT": str(_info.get("port", 5432)),
    }
}
INSTALLED_APPS: list[str] = []
USE_TZ = True
SECRET_KEY = "tests-only"
