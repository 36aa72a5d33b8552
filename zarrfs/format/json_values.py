"""What a JSON value is, for annotations: the types json.loads makes and json.dumps takes.
Values read from a document are `object` until checked; values written into one are JsonValue."""

from typing import TypeAlias

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
