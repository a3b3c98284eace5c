"""The app's one table and its async SQLAlchemy engine (asyncpg driver), on DATABASE_URL."""

from __future__ import annotations

import os

from sqlalchemy import Boolean, String
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def async_url(url: str) -> str:
    """DATABASE_URL with SQLAlchemy's asyncpg driver named."""
    return "postgresql+asyncpg://" + url.split("://", 1)[1]


engine = create_async_engine(async_url(os.environ["DATABASE_URL"]))
Session = async_sessionmaker(engine, expire_on_commit=False)


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False)  # set by the worker's handler


async def create_tables() -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
