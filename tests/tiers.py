"""The two tiers of the test suite (issue 44, item 5): which tests are `slow`, the rest being the fast tier.

    bash scripts/test-fast.sh        # ruff, then pytest -m "not slow": every package's quick tests
    bash scripts/test.sh             # the whole suite, as CI runs it

`tests/conftest.py` marks every test named here `slow` at collection (so the test files stay as they
are), and every test marked `container` too. A new test that trains, exports, starts a service process
or a cluster, or runs a benchmark end to end goes here (or carries `@pytest.mark.slow`): the fast tier
must stay under 3 minutes on a 2-core machine, which is how it was chosen.

How: every test's setup, call and teardown were timed (`pytest --durations=0`, the suite run in parts on
the 2-core development machine while other jobs kept it busy, load average 5-9). A test function (all its
parameters together) taking 1 s or more is slow; a file whose fixtures took more than 3 s to set up (a
service process, a trained model) is slow as a whole, because its fixture's time would otherwise move to
whichever of its tests stayed; a file of 3 s or less in all stays whole. The figures are those seconds,
to be measured again when the tiers are redrawn. Where a package's only quick tests would be gone, one
of its quick ones stays (`tests/test_tiers.py` checks that each package keeps some).
"""

from __future__ import annotations

import re

import pytest

# Whole files -> their measured seconds (the fixtures' set-up included).
SLOW_FILES: dict[str, float] = {
    "tests/gpu": 0.0,  # the CUDA lane (scripts/gpu-lane.sh): skipped here, minutes on a GPU host
    # the user set installed in a fresh copy, then serve.sh, train, export, the client, a local Ray
    "tests/test_user_workflow.py": 96.3,  # 2026-12-06, in the full suite (setup.sh compiling on every core)
    "tests/app/protocols/oip_v2/test_grpc_covariates.py": 26.5,
    "tests/app/protocols/oip_v2/test_tritonclient_grpc.py": 5.3,
    "tests/app/protocols/rsa_v1/test_anomaly_echo.py": 35.0,  # fixtures 11 s (measured in the fast tier)
    "tests/app/protocols/rsa_v1/test_evaluation_covariates.py": 13.0,
    "tests/app/protocols/rsa_v1/test_refit_covariates.py": 34.9,  # the shops trained, four fits (loaded)
    "tests/app/protocols/rsa_v1/test_global_attention.py": 51.3,  # five models trained (loaded machine)
    "tests/app/protocols/rsa_v1/test_zero_shot.py": 19.4,  # two models trained, two services (loaded)
    "tests/app/protocols/test_fit_forecast.py": 14.9,
    "tests/app/protocols/test_fit_longer_horizon.py": 24.8,  # a service process (loaded machine)
    "tests/app/test_model_control.py": 104.3,
    "tests/app/test_workers.py": 45.6,
    "tests/app/ui/test_covariates.py": 23.7,
    "tests/app/ui/test_evaluation_views.py": 14.2,
    "tests/app/ui/test_files_and_zones.py": 13.3,
    "tests/app/ui/test_global_models.py": 62.6,  # a hybrid and a transformer trained (loaded machine)
    "tests/app/ui/test_inspector.py": 20.5,
    "tests/batch/test_cluster.py": 60.6,
    "tests/batch/test_fit.py": 15.5,
    "tests/batch/test_score_covariates.py": 39.3,
    # six models trained on M3/Tourism slices, AutoETS (loaded machine)
    "tests/bench/test_zero_shot.py": 3.2,
    "tests/bench/test_lone_series.py": 22.5,  # 15 series trained, statsforecast (2026-12-08, beside a bench)
    "tests/bench/test_big_bodies.py": 26.0,  # a service and six 4 MB bodies: 22-30 s beside another test run
    "tests/client/test_client.py": 6.5,
    "tests/client/test_covariates_client.py": 13.4,
    "tests/client/test_cross_validation_refit.py": 12.2,  # a service process (loaded machine)
    "tests/client/test_explain_client.py": 23.7,  # a live service (loaded machine)
    "tests/client/test_evaluation_covariates_client.py": 3.9,
    "tests/client/test_short_series_client.py": 28.9,
    "tests/client/test_zero_shot_client.py": 40.6,  # a service process (loaded machine)
    "tests/deploy/test_fleet.py": 109.8,
    "tests/deploy/test_prometheus.py": 30.5,
    "tests/export/test_covariates_served.py": 9.6,
    "tests/export/test_covariate_report_origins.py": 9.7,  # validations of small covariate panels
    "tests/export/test_drop_hint.py": 6.4,  # two trainings and an export through the CLI
    "tests/export/test_local_time_served.py": 16.1,
    "tests/export/test_onnx.py": 46.7,  # the tests' own exports without intervals (2026-12-06; 76.2 before)
    "tests/export/test_own_data_served.py": 41.2,
    "tests/export/test_transformer_onnx.py": 58.4,  # 9.7, then the mirror's two exports and three trainings
    "tests/export/test_transformer_served.py": 10.3,
    "tests/export/test_weekly_hybrid.py": 10.0,  # an hourly panel trained, exported and served
}
# Single test functions (every parameter together), by file -> their measured seconds.
SLOW_TESTS: dict[str, dict[str, float]] = {
    "tests/app/api/routes/test_attention.py": {
        "test_matrices_equal_direct_inspect_call": 1.3,
        "test_png": 4.2,
        "test_png_rendering_holds_the_inspection_slot": 1.2,
    },
    "tests/app/api/routes/test_cycle.py": {
        "test_attention_gets_the_phase": 3.2,
    },
    "tests/app/api/routes/test_faults.py": {
        "test_session_error_is_500_and_the_batcher_keeps_serving": 1.5,
    },
    "tests/app/api/routes/test_forecast.py": {
        "test_concurrent_requests_are_merged_and_split_back": 1.5,
    },
    "tests/app/api/routes/test_forecast_errors.py": {
        "test_a_body_over_the_size_limit_names_the_ways_out": 1.6,
    },
    "tests/app/api/routes/test_metrics.py": {
        "test_exposition_formats_and_families": 1.5,
        "test_gpu_memory_only_where_cuda_is_in_use": 2.1,
        "test_overload_timeout_and_in_flight": 2.7,
    },
    "tests/app/api/test_middleware.py": {
        "test_client_can_shorten_but_not_extend_the_deadline": 3.7,
    },
    "tests/app/artifacts/test_contract.py": {
        "test_exporter_imports_only_the_contract_of_the_service": 5.0,
    },
    "tests/app/core/test_connections.py": {
        "test_slow_and_silent_connections_leave_real_forecasts_answered": 20.0,
        "test_slow_headers_and_slow_bodies_are_closed_by_every_front_end": 20.6,
        "test_a_client_that_leaves_before_its_body_is_counted_499_not_500": 3.0,  # a service process
    },
    "tests/app/core/test_offload.py": {
        "test_a_dead_worker_means_parsing_on_the_loop_not_failed_requests": 1.1,
        "test_large_bodies_answer_the_same_through_the_worker": 1.6,
        "test_the_worker_starts_with_the_parsers_imported": 1.3,
    },
    "tests/app/engine/test_batching_admission.py": {
        "test_memory_is_released_once_the_version_has_been_idle_not_between_busy_batches": 1.6,
    },
    "tests/app/engine/test_runners.py": {
        "test_bound_runner_answers_bit_for_bit_as_the_plain_session": 5.1,
    },
    "tests/app/protocols/oip_v2/test_grpc_server.py": {
        "test_an_unauthenticated_flood_leaves_memory_flat": 6.9,
        "test_keys_are_checked_before_the_message_and_answer_as_before": 2.9,
    },
    "tests/app/protocols/rsa_v1/test_big_bodies.py": {
        "test_a_big_body_parsed_in_the_worker_is_answered_as_on_the_loop": 13.8,
        "test_a_refusal_from_the_parse_process_reads_as_the_loops": 4.4,
        "test_healthz_answers_while_a_big_body_is_parsed": 27.3,
    },
    "tests/app/protocols/rsa_v1/test_evaluation.py": {
        "test_each_cutoff_is_forecast_from_the_values_before_it_beside_the_actuals": 1.1,
        "test_the_shipped_models_backtest_equals_the_offline_evaluator_on_the_etth1_test_split": 1.1,
    },
    "tests/app/protocols/rsa_v1/test_plotting.py": {
        "test_the_documented_attention_request_renders_the_sample_png": 4.0,
    },
    "tests/app/protocols/rsa_v1/test_wire.py": {
        "test_the_fast_lane_reads_what_the_model_reads_or_steps_aside": 4.6,
    },
    "tests/app/protocols/test_panel_served.py": {
        "test_kserve_refuses_a_series_shorter_than_min_history_naming_it": 5.8,
        "test_v1_forecasts_unseen_series_of_any_length_with_their_own_timestamps": 2.3,
    },
    "tests/app/protocols/test_readme_protocols.py": {
        "test_timeseries_curl_works_as_printed": 1.2,
        "test_tritonclient_snippet_works_as_printed": 11.1,
    },
    "tests/app/protocols/timeseries/test_timeseries.py": {
        "test_a_start_timestamp_that_is_not_iso_8601_says_so": 5.6,
    },
    "tests/app/test_admission.py": {
        "test_a_stalled_body_refuses_no_other_request": 2.4,
        "test_overload_is_refused_fast_and_goodput_holds": 13.3,
    },
    "tests/app/test_drain.py": {
        "test_grpc_stops_accepting_with_http_and_the_process_exits_within_the_grace": 10.9,
        "test_sigterm_under_load_loses_no_accepted_request": 59.1,
    },
    "tests/app/test_liveness.py": {
        "test_a_killed_engine_answers_every_request_in_flight_503_fast": 18.3,
        "test_a_killed_front_end_leaves_no_child_behind": 20.8,
        "test_a_stopped_engine_turns_readiness_503_and_metrics_answer": 24.7,
    },
    "tests/app/test_schemathesis.py": {
        "test_attention_png": 7.4,
        "test_openapi_fuzz": 43.3,  # 60 examples an operation (2026-12-06; 120 before)
        "test_times_at_the_ends_of_the_calendar": 6.0,
        "test_valid_windows": 15.0,
    },
    "tests/app/test_server.py": {
        "test_attention_png_over_http": 1.9,
        "test_forecast_over_http": 3.0,
    },
    "tests/app/test_shipped_model.py": {
        "test_attention_json_parses_as_the_pydantic_encoder_wrote_it": 1.0,
        "test_default_attention_is_the_last_querys_row_per_head": 3.7,
        "test_default_has_a_daily_cycle": 1.4,
        "test_served_without_torch": 4.9,
        "test_versions_3_to_5_have_intervals_for_every_horizon": 1.9,
    },
    "tests/batch/test_bad_input.py": {
        "test_the_command_refuses_a_repeated_time_and_walks_a_loop_once": 11.5,
    },
    "tests/batch/test_loopback.py": {
        "test_a_local_ray_listens_on_loopback_only": 5.5,
    },
    "tests/batch/test_user_set.py": {
        "test_the_batch_command_without_ray_names_the_user_set": 1.8,  # a fresh interpreter
    },
    "tests/batch/test_score.py": {
        "test_a_folder_of_parts_on_local_ray_then_a_rerun_skips_them": 20.9,
        "test_batch_answers_are_the_services_bit_for_bit": 1.8,
        "test_the_batch_command_leaves_no_token_in_the_home_folder": 17.8,
    },
    "tests/batch/test_score_zones.py": {
        "test_a_future_table_over_the_repeat_is_read_by_its_order": 15.1,
        "test_the_autumn_repeat_is_read_as_the_trainer_reads_it": 2.7,
    },
    # tests/bench: measured again on 2026-12-03 (`pytest -q -n 2 --dist loadfile tests/bench --durations=80`,
    # setup, call and teardown, load average 3-5; tests/bench/test_competitions.py alone, in one process:
    # 10 s); its test functions under 1 s kept their earlier figures.
    "tests/bench/test_batch.py": {
        "test_smoke_run_measures_the_three_contenders": 28.5,  # one raw batch size in the smoke (was 124.7)
    },
    "tests/bench/test_batching_merge.py": {
        "test_requests_are_sent_checked_and_the_session_calls_counted": 2.6,
    },
    "tests/bench/test_competitions.py": {
        "test_a_smoke_run_with_every_model_reports_the_benchmark": 4.5,
        "test_statsforecast_peers_and_the_ensemble": 4.7,
    },
    "tests/bench/test_covariates.py": {
        "test_elecdemand_slice_reads_its_covariates": 1.4,
        "test_every_variant_and_peer_runs_on_the_same_origins": 3.1,
    },
    "tests/bench/test_engine.py": {
        "test_smoke_run_compares_the_same_weights_in_both_engines": 7.3,
    },
    "tests/bench/test_evaluation_benches.py": {
        "test_the_backtest_bench_meets_its_target_on_a_few_windows": 1.2,
    },
    "tests/bench/test_global_transformer.py": {
        "test_every_model_on_both_slices": 1.5,
        "test_the_command_writes_its_json": 2.3,
    },
    "tests/bench/test_gpu_lane.py": {
        "test_the_cpu_form_writes_its_tables_and_json_into_the_folder": 13.1,
    },
    "tests/bench/test_loadgen.py": {
        "test_short_form_against_the_service": 10.5,
    },
    # test_memory, test_rem_folding, test_scaling, test_engine: measured again on 2026-12-06 after their
    # trims (two versions, one length, no interval calibrated), each file alone, nothing else running.
    "tests/bench/test_memory.py": {
        "test_bench_runs_end_to_end_at_tiny_sizes": 6.4,
        "test_default_arena_keeps_the_peak_of_the_biggest_batch": 3.4,
        "test_recommended_settings_give_memory_back_after_bursts": 4.2,
        "test_service_sessions_give_memory_back_after_bursts": 3.6,
    },
    "tests/bench/test_rem_folding.py": {
        "test_smoke_run_times_both_graphs_on_the_same_forecasts": 8.4,
    },
    "tests/bench/test_saturation.py": {
        "test_saturation_smoke": 9.4,
    },
    "tests/bench/test_scaling.py": {
        "test_smoke_run_measures_sessions_and_the_server": 15.4,
    },
    "tests/bench/test_serving.py": {
        "test_smoke_run_measures_every_server": 15.7,
    },
    "tests/bench/test_serving_covariates.py": {
        "test_smoke_measures_both_models_every_round": 2.4,
    },
    "tests/bench/test_front_end_kills.py": {
        "test_smoke_run_kills_a_front_end_under_every_kind_of_caller": 8.1,
    },
    "tests/bench/test_workers.py": {
        "test_smoke_run_compares_one_process_with_two_front_ends": 23.4,
    },
    "tests/client/test_fit_forecast.py": {
        "test_fit_forecast_is_the_routes_answer_as_a_long_frame": 3.3,
    },
    "tests/client/test_wall_clock.py": {
        "test_a_forecast_after_the_repeat_is_v1s": 15.2,
    },
    "tests/deploy/test_kubernetes.py": {
        "test_every_overlay_renders_what_it_should": 1.3,
        "test_object_is_valid_against_its_schema": 1.9,
        "test_the_pod_runs_the_service_as_it_expects": 3.0,
    },
    "tests/export/test_calendar.py": {
        "test_quarterly_large_valued_series_trains_exports_and_serves_on_the_calendar": 11.0,
    },
    "tests/export/test_conformal.py": {
        "test_the_export_writes_intervals_its_validation_windows_can_calibrate": 11.1,
    },
    "tests/export/test_covariates_forecast.py": {
        "test_a_zoned_model_reads_both_files_in_its_zone_across_a_clock_change": 11.2,
    },
    "tests/export/test_covariates_wide.py": {
        "test_a_wide_file_with_a_future_covariate_from_csv_to_served_forecast": 18.3,
    },
    "tests/export/test_linear_fit.py": {
        "test_readout_least_squares_starts_training_from_the_fit": 1.8,
        "test_training_keeps_the_fitted_linear_path_frozen": 3.2,
    },
    "tests/export/test_panels.py": {
        "test_the_panel_cli_takes_timezone": 5.4,
    },
    "tests/export/test_train.py": {
        "test_a_log_gets_one_plain_line_per_epoch_and_the_summary_says_what_was_kept": 11.9,
        "test_a_spreadsheet_export_trains_with_the_flags_that_answer_its_quirks": 20.1,
        "test_baseline_variant_has_no_rem": 1.3,
        "test_cli_reports_a_bad_csv_without_a_traceback": 3.9,
        "test_cli_reports_bad_model_settings_without_a_traceback": 6.8,
        "test_evaluate_command_prints_the_report_metrics": 3.3,
        "test_input_length_auto_keeps_the_best_least_squares_start_on_validation": 2.9,
        "test_loss_falls_and_report_is_complete": 2.8,
        "test_same_seed_same_result": 2.8,
        "test_shipped_configs_train": 7.5,
    },
    "tests/models/test_attention.py": {
        "test_fused_explicit_and_folded_paths_agree": 2.4,
        "test_gate_zero_is_plain_attention": 1.4,
    },
    "tests/models/test_forecaster.py": {
        "test_each_kind_of_covariate_moves_the_forecast": 1.0,
        "test_gradients_reach_eta_nu_theta_mu": 1.6,
        "test_sample_independent_of_its_batch": 1.4,
        "test_training_step_moves_rem_parameters": 1.6,
    },
    "tests/models/test_rem.py": {
        "test_long_cyclic_rem_is_finite": 6.4,
        "test_long_regular_rem_with_negative_lambda_is_finite": 9.8,
    },
    "tests/rsa_core/test_one_rule.py": {
        "test_the_service_loads_the_core_without_pandas": 3.2,  # imports app.main in a fresh interpreter
    },
    "tests/test_readme.py": {
        "test_bring_your_own_csv_walkthrough_works_as_printed": 29.9,
        "test_curl_example_answer_is_what_the_service_says": 3.8,
        "test_models_example_runs": 3.0,
        "test_the_backtest_and_anomaly_examples_answer_as_described": 12.0,
        "test_the_fit_on_request_example_runs_as_printed": 18.5,
        "test_the_panel_walkthrough_serves_an_unseen_series_as_printed": 9.1,
        "test_the_sales_example_trains_and_prints_what_the_readme_shows": 18.2,
    },
}


def is_slow(item: pytest.Item) -> bool:
    """Marked `slow`, named here (its file, or its function in its file), or marked `container`."""
    if item.get_closest_marker("slow") or item.get_closest_marker("container"):
        return True
    path, _, rest = re.sub(r"\[.*\]$", "", item.nodeid).partition("::")
    if rest.split("::")[-1] in SLOW_TESTS.get(path, {}):
        return True
    return any(path == f or path.startswith(f + "/") for f in SLOW_FILES)


def mark(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
