"""The client's types against the API's contract (docs/openapi.json, which the server's tests
keep equal to what the gateway serves): every field a dataclass declares, and every field its
``parse`` reads, must be a property of the schema of the object it mirrors."""

import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

from skill_gateway import ApiKey, Balance, KeyStatus, Skill, UsageCall

DOCUMENT = json.loads((Path(__file__).resolve().parents[3] / "docs" / "openapi.json").read_text())
SCHEMAS = DOCUMENT["components"]["schemas"]

# Fields the client computes rather than reads (the whole JSON object, kept as it came).
DERIVED = {"raw"}

# The schema each dataclass mirrors, where its name is not the schema's.
SCHEMA_OF = {"KeyStatus": "OwnKey"}


def read_keys(cls):
    """The JSON keys ``cls.parse`` reads: every ``raw.get("...")`` in its source."""
    return set(re.findall(r'raw\.get\("(\w+)"', inspect.getsource(cls.parse)))


@pytest.mark.parametrize("cls", [Skill, Balance, UsageCall, KeyStatus, ApiKey], ids=lambda c: c.__name__)
def test_declares_and_reads_only_fields_the_api_has(cls):
    properties = set(SCHEMAS[SCHEMA_OF.get(cls.__name__, cls.__name__)]["properties"])
    declared = {f.name for f in dataclasses.fields(cls)} - DERIVED
    assert declared - properties == set(), f"{cls.__name__} declares fields the API does not have"
    assert read_keys(cls) - properties == set(), f"{cls.__name__}.parse reads fields the API does not have"
    assert read_keys(cls), "the check found nothing to check"


def test_finds_the_fields_parse_reads():
    """The source scan sees every key Balance.parse reads, so a new one would be checked too."""
    assert read_keys(Balance) == {"currency", "available", "available_base_units", "held", "held_base_units"}
