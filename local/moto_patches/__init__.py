"""Every change Longhaul makes to moto (5.2.5) lives in this package, a module per service; each is small,
documented and idempotent. IAM enforcement (`iam.enforce_iam`) is a mode the platform turns on after `apply()`,
since it needs to know which access keys are the platform's own.

`apply()` installs all of them, `revert()` restores moto's own behaviour (used by the tests that pin the
upstream behaviour each patch works around). Patches replace module attributes or methods; the originals
are kept in `core._ORIGINALS` the first time and never overwritten, so applying twice is harmless.
"""

from __future__ import annotations

from local.moto_patches.awslambda import (
    reference_lambda_versions,
    run_lambdas_in_process,
    stop_running_lambdas_in_process,
    unreference_lambda_versions,
)
from local.moto_patches.bedrock import refuse_batch_inference_jobs, run_batch_inference_jobs
from local.moto_patches.cloudformation import (
    read_json_templates_as_json,
    read_templates_as_yaml_first,
    update_in_dependency_order,
    update_in_template_order,
)
from local.moto_patches.cloudwatch import (
    list_metrics_once_per_dimension_set,
    list_metrics_per_data_point,
    query_dimension_subsets,
    query_exact_dimension_sets,
)
from local.moto_patches.core import (
    _ORIGINALS,
    RUNTIME_CONFIG,
    _original,
    disable_execution,
    enable_execution,
)
from local.moto_patches.dynamodb import (
    ITEM_OPERATIONS,
    back_up_whole_tables,
    backup_only_touched_items,
    copy_items_for_every_update,
    copy_items_for_streams_only,
    parse_conditions_for_every_check,
    parse_conditions_once_per_transaction,
    parse_update_expressions_every_time,
    parse_update_expressions_once,
    query_one_partition,
    query_whole_table,
    read_processing_maps_once,
    read_processing_maps_per_node,
    serialize_dynamodb_operations,
    serialize_item_answers_by_shape,
    size_new_items_once,
    size_new_items_per_attribute,
    size_values_directly,
    size_values_like_upstream,
    tokenize_conditions_every_time,
    tokenize_conditions_once,
    unserialize_dynamodb_operations,
    write_item_answers_directly,
)
from local.moto_patches.ecs import (
    record_container_tasks_only,
    run_container_tasks_locally,
    translate_ecs_task_names,
    untranslate_ecs_task_names,
)
from local.moto_patches.event_targets import invoke_lambda_targets, skip_lambda_targets
from local.moto_patches.events import name_event_buses_by_ref, unname_event_buses
from local.moto_patches.iam import enforce_iam, relax_iam
from local.moto_patches.interpreter import (
    ABORTED_ITERATION,
    _wait_hooks,
    loud_interpreter_logs,
    quiet_interpreter_logs,
    scale_interpreter_waits,
    stop_executions_promptly,
    unscale_interpreter_waits,
    unstop_executions,
)
from local.moto_patches.server import (
    list_actions_of_the_class,
    look_up_actions_by_name,
    look_up_backends_under_lock,
    look_up_backends_without_lock,
    resolve_backends_every_time,
    resolve_backends_once,
)
from local.moto_patches.ses import create_email_identities, skip_email_identities
from local.moto_patches.sqs import (
    check_retention_directly,
    check_retention_through_attributes,
    compute_queue_attributes_at_once,
    compute_queue_attributes_when_read,
    read_the_clock_directly,
    read_the_clock_through_datetimes,
)
from local.moto_patches.stepfunctions import (
    INTERPRETER_ACCESS_KEY,
    create_interpreter_clients_every_time,
    deploy_state_machine_versions,
    evaluation_components,
    keep_iteration_error_names,
    list_map_runs_like_upstream,
    name_executions_like_aws,
    parse_definitions_every_time,
    parse_definitions_once,
    parse_json_paths_every_time,
    parse_json_paths_once,
    refuse_iteration_error_names,
    refuse_map_run_listings,
    route_state_machines_to_interpreter,
    run_state_calls_as_the_machine_role,
    run_state_calls_unsigned,
    share_interpreter_clients,
    share_token_across_attempts,
    start_executions_on_machines_only,
    start_executions_on_versions,
    token_per_attempt,
    undeploy_state_machine_versions,
    unname_executions,
    unroute_state_machines,
)
from local.moto_patches.transport import send_in_process, send_over_http, serve_in_process, stop_serving_in_process

__all__ = [
    "ABORTED_ITERATION",
    "INTERPRETER_ACCESS_KEY",
    "ITEM_OPERATIONS",
    "RUNTIME_CONFIG",
    "_original",
    "_wait_hooks",
    "apply",
    "back_up_whole_tables",
    "backup_only_touched_items",
    "create_email_identities",
    "disable_execution",
    "enable_execution",
    "enforce_iam",
    "evaluation_components",
    "invoke_lambda_targets",
    "is_applied",
    "query_whole_table",
    "quiet_interpreter_logs",
    "read_processing_maps_once",
    "read_processing_maps_per_node",
    "refuse_batch_inference_jobs",
    "relax_iam",
    "revert",
    "route_state_machines_to_interpreter",
    "run_batch_inference_jobs",
    "run_container_tasks_locally",
    "scale_interpreter_waits",
    "serve_in_process",
    "skip_email_identities",
    "skip_lambda_targets",
    "stop_serving_in_process",
    "tokenize_conditions_every_time",
    "tokenize_conditions_once",
    "unserialize_dynamodb_operations",
]


def apply() -> None:
    """Install every patch (idempotent)."""
    enable_execution()
    route_state_machines_to_interpreter()
    name_executions_like_aws()
    run_lambdas_in_process()
    scale_interpreter_waits()
    stop_executions_promptly()
    quiet_interpreter_logs()
    backup_only_touched_items()
    copy_items_for_streams_only()
    serialize_dynamodb_operations()
    refuse_map_run_listings()
    translate_ecs_task_names()
    token_per_attempt()
    run_container_tasks_locally()
    parse_definitions_once()
    resolve_backends_once()
    look_up_backends_without_lock()
    look_up_actions_by_name()
    send_in_process()
    parse_json_paths_once()
    share_interpreter_clients()
    check_retention_directly()
    read_the_clock_directly()
    compute_queue_attributes_when_read()
    parse_update_expressions_once()
    read_processing_maps_once()
    tokenize_conditions_once()
    parse_conditions_once_per_transaction()
    query_one_partition()
    write_item_answers_directly()
    size_values_directly()
    size_new_items_once()
    run_state_calls_as_the_machine_role()
    update_in_dependency_order()
    read_json_templates_as_json()
    reference_lambda_versions()
    deploy_state_machine_versions()
    start_executions_on_versions()
    create_email_identities()
    name_event_buses_by_ref()
    invoke_lambda_targets()
    run_batch_inference_jobs()
    keep_iteration_error_names()
    list_metrics_once_per_dimension_set()
    query_exact_dimension_sets()


def revert() -> None:
    """Restore moto's own behaviour (idempotent)."""
    relax_iam()
    query_dimension_subsets()
    list_metrics_per_data_point()
    run_state_calls_unsigned()
    start_executions_on_machines_only()
    undeploy_state_machine_versions()
    unreference_lambda_versions()
    update_in_template_order()
    read_templates_as_yaml_first()
    skip_email_identities()
    unname_event_buses()
    skip_lambda_targets()
    refuse_batch_inference_jobs()
    refuse_iteration_error_names()
    parse_conditions_for_every_check()
    tokenize_conditions_every_time()
    read_processing_maps_per_node()
    parse_update_expressions_every_time()
    query_whole_table()
    serialize_item_answers_by_shape()
    size_new_items_per_attribute()
    size_values_like_upstream()
    check_retention_through_attributes()
    read_the_clock_through_datetimes()
    compute_queue_attributes_at_once()
    create_interpreter_clients_every_time()
    parse_json_paths_every_time()
    resolve_backends_every_time()
    look_up_backends_under_lock()
    list_actions_of_the_class()
    send_over_http()
    parse_definitions_every_time()
    record_container_tasks_only()
    share_token_across_attempts()
    untranslate_ecs_task_names()
    list_map_runs_like_upstream()
    unserialize_dynamodb_operations()
    copy_items_for_every_update()
    back_up_whole_tables()
    loud_interpreter_logs()
    unstop_executions()
    unscale_interpreter_waits()
    stop_running_lambdas_in_process()
    unname_executions()
    unroute_state_machines()
    disable_execution()


def is_applied() -> bool:
    return bool(_ORIGINALS)
