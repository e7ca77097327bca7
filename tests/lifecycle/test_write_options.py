"""Every ``write_table`` takes the same options, with the same defaults: those of client.commit.WriteOptions."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest

import client
from client.commit import WriteOptions


def _keywords(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]


OPTIONS = [(f.name, f.default) for f in dataclasses.fields(WriteOptions)]


def test_the_pyarrow_write_table_takes_exactly_the_write_options() -> None:
    assert _keywords(client.write_table) == OPTIONS


def test_the_spark_write_table_takes_exactly_the_write_options() -> None:
    spark = pytest.importorskip("client.spark", reason="client.spark needs pyspark")
    assert _keywords(spark.write_table) == OPTIONS


def test_options_are_collected_by_name_and_a_missing_one_is_an_error() -> None:
    given = {name: object() for name, _ in OPTIONS}
    options = WriteOptions.collect({**given, "data": 1})
    assert {name: getattr(options, name) for name in given} == given
    with pytest.raises(KeyError, match="before_commit"):
        WriteOptions.collect({k: v for k, v in given.items() if k != "before_commit"})
