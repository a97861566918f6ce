"""CloudFormation: a stack update creates and updates its resources in dependency order, then removes what left the
template, keeping what it retains (as CloudFormation's update and cleanup phases do); a JSON template is read as JSON.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

from local.moto_patches.core import _define, _original, _replace, _restore

LOG = logging.getLogger(__name__)
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def _resource_map_class() -> type:
    from moto.cloudformation.parsing import ResourceMap

    return ResourceMap


def references(value: Any) -> Iterator[str]:
    """Every name a template fragment refers to: `Ref`, `Fn::GetAtt`, `${Name}` in `Fn::Sub`, `DependsOn`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".", 1)[0]
                yield str(target)
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                own = set(inner[1]) if isinstance(inner, list) and len(inner) > 1 else set()
                yield from (name for name in _SUB_NAME.findall(str(text)) if name not in own)
                if isinstance(inner, list) and len(inner) > 1:
                    yield from references(inner[1])
            elif key == "DependsOn":
                yield from ([inner] if isinstance(inner, str) else [str(d) for d in inner])
            else:
                yield from references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from references(inner)


def _update_in_dependency_order(self: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
    """`ResourceMap.update`: create the added resources and update the changed ones in the order their references
    give (a resource after everything it refers to), then delete the resources that left the template, except those
    whose `DeletionPolicy` is `Retain`."""
    from moto.cloudformation.parsing import parse_and_update_resource

    changes = self.build_resource_diff(template, parameters)
    previous: dict[str, Any] = self._resource_json_map
    self._template = template
    if parameters:
        self.input_parameters = parameters
    self.load_mapping()
    self.load_parameters()
    self.load_conditions()
    self._resource_json_map = template["Resources"]
    resources: dict[str, Any] = template["Resources"]
    added, pending = set(changes["Add"]), set(changes["Add"]) | set(changes["Modify"])
    done: set[str] = set()

    def apply(name: str, visiting: frozenset[str]) -> None:
        if name in done or name not in pending:
            return
        for needed in references(resources[name]):
            if needed != name and needed not in visiting:
                apply(needed, visiting | {name})
        if name in added:
            _ = self[name]  # created on first access, its references resolved against the updated resources
        else:
            updated = parse_and_update_resource(
                name, resources[name], self, account_id=self._account_id, region_name=self._region_name
            )
            if updated is not None:  # a type moto cannot update keeps its resource as it was
                self._parsed_resources[name] = updated
        done.add(name)

    for name in resources:
        apply(name, frozenset())
    for name in changes["Remove"]:  # the cleanup phase: after everything that referred to them has been updated
        resource = self._parsed_resources.pop(name, None)
        if resource is None or previous[name].get("DeletionPolicy") == "Retain":
            continue
        try:
            self._delete_resource(resource, previous[name])
        except Exception:  # CloudFormation reports a failed cleanup and keeps the stack updated
            LOG.warning("could not delete %s after the update", name, exc_info=True)


def update_in_dependency_order() -> None:
    """Make a stack update follow the template's dependencies, and keep retained resources.

    Upstream's `ResourceMap.update` deletes removed resources first (whatever their `DeletionPolicy`), then creates
    every added resource, then updates every changed one, in template order. A new `AWS::Lambda::Version` beside its
    function's new code is therefore published before the function is updated (so it publishes the old code, or no
    new version at all), a state machine's new definition can be applied before the versions it names exist, and a
    retained resource is deleted. Now the added and changed resources are handled together, each after the resources
    it refers to, and the removed ones afterwards, except the retained ones.
    """
    _replace(_resource_map_class(), "update", _update_in_dependency_order)


def update_in_template_order() -> None:
    _restore(_resource_map_class(), "update")


def _parse_json_first(template: str) -> dict[str, Any]:
    """`Stack.parse_template`: a JSON template (what the CDK synthesizes) read with `json.loads`, as CloudFormation
    reads JSON; anything else upstream's way (PyYAML first, JSON when YAML fails)."""
    if isinstance(template, str) and template.lstrip().startswith("{"):
        try:
            parsed = json.loads(template)
        except ValueError:
            pass
        else:
            if isinstance(parsed, dict):
                return parsed
    upstream: Any = _original(_stack_class(), "parse_template")
    return upstream(template)  # type: ignore[no-any-return]


def _parse_change_set_json_first(self: Any) -> None:
    """`ChangeSet._parse_template`, the same way."""
    self.template_dict = _parse_json_first(self.template)


def _stack_class() -> type:
    from moto.cloudformation.models import Stack

    return Stack


def _change_set_class() -> type:
    from moto.cloudformation.models import ChangeSet

    return ChangeSet


def read_json_templates_as_json() -> None:
    """Parse a JSON template with `json.loads`. Upstream reads every template with PyYAML's pure-Python loader first
    and falls back to JSON only when that fails: the synthesized template (~780 KB) took about a second of every
    platform start that way, against a tenth of that as JSON, for the same dictionary (JSON is YAML; the CDK's
    template has no YAML tags)."""
    _define(_stack_class(), "parse_template", staticmethod(_parse_json_first))  # (keeps upstream's staticmethod)
    _replace(_change_set_class(), "_parse_template", _parse_change_set_json_first)


def read_templates_as_yaml_first() -> None:
    _restore(_stack_class(), "parse_template")
    _restore(_change_set_class(), "_parse_template")
