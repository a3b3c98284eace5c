"""A Flask view that writes a row and enqueues its e-mail in ONE transaction."""

import os

import psycopg
from flask import Flask, request

import skiplock


def create_app() -> Flask:
    app = Flask(__name__)

    @app.post("/signup")
    def signup():
        email = request.form["email"]
        with psycopg.connect(os.environ["DATABASE_URL"]) as conn:  # commits on success, rolls back on error
            conn.execute("INSERT INTO signups (email) VALUES (%s)", (email,))
            skiplock.enqueue("emails", {"to": email}, conn=conn)
            if request.form.get("fail"):
                raise RuntimeError("payment provider down")  # rolls back the row AND the job
        return {"ok": True}, 201

    return app
