-- A study database written by harness 0.1.0 (commit 8bb4608), the release before the harness's own
-- tables had a schema version: Optuna's tables, one comparison queue ("release"), three trial
-- records in harness_records (trial a: a failed attempt 1 and a completed attempt 2; trial b:
-- one completed attempt) and one sequential rule in harness_sequential_rules; no harness_schema.
-- Made with that commit's code (PYTHONPATH at its tree, optuna 5.1.0) by:
--   storage = harness.tracking.storage.open_storage(url, create=True)
--   harness.runner.queue.create_queue(storage, "release", "maximize")
--   store = harness.tracking.shared_records.RecordStore.of(storage, "release", create=True)
--   store.put(...) for make_record(TrialSpec(study="release", arm=a|b, seed=0, steps=2, grpo), ...)
--   harness.tracking.sequential_rules.fix(storage.engine, "release", 1,
--                                         {"alpha": 0.05, "looks": [2, 4], "min_effect": 0.1})
-- then dumped with `sqlite3 release.db .dump`. tests/store/test_store_schema.py builds the
-- database from this text and opens it with the current code.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE studies (
	study_id INTEGER NOT NULL,
	study_name VARCHAR(512) NOT NULL,
	PRIMARY KEY (study_id)
);
INSERT INTO studies VALUES(1,'release');
CREATE TABLE version_info (
	version_info_id INTEGER NOT NULL,
	schema_version INTEGER,
	library_version VARCHAR(256),
	PRIMARY KEY (version_info_id),
	CHECK (version_info_id=1)
);
INSERT INTO version_info VALUES(1,12,'5.1.0');
CREATE TABLE study_directions (
	study_direction_id INTEGER NOT NULL,
	direction VARCHAR(8) NOT NULL,
	study_id INTEGER NOT NULL,
	objective INTEGER NOT NULL,
	PRIMARY KEY (study_direction_id),
	UNIQUE (study_id, objective),
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO study_directions VALUES(1,'MAXIMIZE',1,0);
CREATE TABLE study_user_attributes (
	study_user_attribute_id INTEGER NOT NULL,
	study_id INTEGER,
	"key" VARCHAR(512),
	value_json TEXT,
	PRIMARY KEY (study_user_attribute_id),
	UNIQUE (study_id, "key"),
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE study_system_attributes (
	study_system_attribute_id INTEGER NOT NULL,
	study_id INTEGER,
	"key" VARCHAR(512),
	value_json TEXT,
	PRIMARY KEY (study_system_attribute_id),
	UNIQUE (study_id, "key"),
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE trials (
	trial_id INTEGER NOT NULL,
	number INTEGER,
	study_id INTEGER,
	state VARCHAR(8) NOT NULL,
	datetime_start DATETIME,
	datetime_complete DATETIME,
	PRIMARY KEY (trial_id),
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE trial_user_attributes (
	trial_user_attribute_id INTEGER NOT NULL,
	trial_id INTEGER,
	"key" VARCHAR(512),
	value_json TEXT,
	PRIMARY KEY (trial_user_attribute_id),
	UNIQUE (trial_id, "key"),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_system_attributes (
	trial_system_attribute_id INTEGER NOT NULL,
	trial_id INTEGER,
	"key" VARCHAR(512),
	value_json TEXT,
	PRIMARY KEY (trial_system_attribute_id),
	UNIQUE (trial_id, "key"),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_params (
	param_id INTEGER NOT NULL,
	trial_id INTEGER,
	param_name VARCHAR(512),
	param_value FLOAT,
	distribution_json TEXT,
	PRIMARY KEY (param_id),
	UNIQUE (trial_id, param_name),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_values (
	trial_value_id INTEGER NOT NULL,
	trial_id INTEGER NOT NULL,
	objective INTEGER NOT NULL,
	value FLOAT,
	value_type VARCHAR(7) NOT NULL,
	PRIMARY KEY (trial_value_id),
	UNIQUE (trial_id, objective),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_intermediate_values (
	trial_intermediate_value_id INTEGER NOT NULL,
	trial_id INTEGER NOT NULL,
	step INTEGER NOT NULL,
	intermediate_value FLOAT,
	intermediate_value_type VARCHAR(7) NOT NULL,
	PRIMARY KEY (trial_intermediate_value_id),
	UNIQUE (trial_id, step),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_heartbeats (
	trial_heartbeat_id INTEGER NOT NULL,
	trial_id INTEGER NOT NULL,
	heartbeat DATETIME NOT NULL,
	PRIMARY KEY (trial_heartbeat_id),
	UNIQUE (trial_id),
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL,
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO alembic_version VALUES('v3.2.0.a');
CREATE TABLE harness_records (
	id INTEGER NOT NULL,
	study VARCHAR(512) NOT NULL,
	trial_id VARCHAR(512) NOT NULL,
	attempt INTEGER NOT NULL,
	status VARCHAR(16) NOT NULL,
	phase VARCHAR(16) NOT NULL,
	fingerprint VARCHAR(64) NOT NULL,
	record TEXT NOT NULL,
	written_at DATETIME DEFAULT CURRENT_TIMESTAMP,
	PRIMARY KEY (id),
	CONSTRAINT uq_harness_records_attempt UNIQUE (study, trial_id, attempt)
);
INSERT INTO harness_records VALUES(1,'release','a-s0-b387869b',1,'failed','compare','f1ff8900c96275a4','{"trial_id":"a-s0-b387869b","study":"release","arm":"a","seed":0,"config_hash":"b387869b213dbcbb","spec":{"study":"release","arm":"a","seed":0,"task":{"name":"addition","n_train":2000,"n_eval":128,"min_digits":1,"max_digits":2,"path":null,"eval_path":null,"reward":null,"tools":[],"max_turns":3,"tool_timeout_s":2.0,"describe_tools":true,"tool_reward":{"answer":1.0,"valid_call":0.1,"max_call_bonus":0.1,"call_bonus_needs_answer":false,"invalid_call":-0.2,"unclosed_tag":-0.2,"turn_limit":-0.5,"clip":3.0},"demo_share":0.5},"model":{"name":"tiny","tiny":{"hidden_size":64,"layers":2,"heads":4,"intermediate_size":128},"dtype":"auto","device":"auto","lora":null,"chat_template":"auto"},"warmstart":{"enabled":true,"steps":1000,"batch_size":32,"lr":0.003,"target_accuracy":0.4,"seed":0},"train":{"steps":2,"prompts_per_step":8,"max_new_tokens":8,"temperature":1.0,"eval_every":10,"eval_samples":4,"eval_pass_k":[],"max_eval_prompts":null,"threads":null,"micro_batch_size":null,"gradient_checkpointing":false,"mask_tool_tokens":true,"placebo_reward":false},"algorithm":{"name":"grpo","group_size":8,"lr":0.0001,"epochs":1,"minibatches":4,"max_grad_norm":1.0,"kind":"rl","advantage":"group_zscore","policy_loss":"clipped","aggregation":"seq_mean_token_mean","kl_estimator":"k3","kl_placement":"loss","critic":"none","old_logprobs":"auto","mismatch":"none","token_filter":"all","sampling":"once","truncated":"keep","entropy_coef":0.0,"eps_low":0.2,"eps_high":0.2,"dual_clip":null,"sapo_tau_pos":1.0,"sapo_tau_neg":1.05,"clip_cov_ratio":0.0002,"clip_cov_lb":1.0,"clip_cov_ub":5.0,"kl_cov_ratio":0.002,"kl_cov_coef":1.0,"dppo_ratio_cap":20.0,"adv_eps":0.0001,"whiten_advantages":false,"drop_degenerate":false,"gamma":1.0,"lam":0.95,"kl_coef":0.04,"mismatch_cap":2.0,"mismatch_floor":0.0,"entropy_top_share":0.2,"max_draws":4,"loss_norm_constant":null,"vf_coef":0.5,"value_clip":0.2,"critic_lr":null},"cache_dir":".cache/harness"},"status":"failed","error":"RuntimeError: boom","final":{},"history":[{"step":0,"train/reward_mean":0.0}],"wall_time_s":0.0,"started_at":"1970-01-01T00:00:00.000+00:00","finished_at":"1970-01-01T00:00:01.000+00:00","host":"vm","device":"cpu","git_commit":null,"harness_version":"0.1.0","harness_path":"/tmp/store_v0/src/harness","attempt":1,"phase":"compare"}','2026-12-04 23:26:09');
INSERT INTO harness_records VALUES(2,'release','a-s0-b387869b',2,'completed','compare','2a72764083af3323','{"trial_id":"a-s0-b387869b","study":"release","arm":"a","seed":0,"config_hash":"b387869b213dbcbb","spec":{"study":"release","arm":"a","seed":0,"task":{"name":"addition","n_train":2000,"n_eval":128,"min_digits":1,"max_digits":2,"path":null,"eval_path":null,"reward":null,"tools":[],"max_turns":3,"tool_timeout_s":2.0,"describe_tools":true,"tool_reward":{"answer":1.0,"valid_call":0.1,"max_call_bonus":0.1,"call_bonus_needs_answer":false,"invalid_call":-0.2,"unclosed_tag":-0.2,"turn_limit":-0.5,"clip":3.0},"demo_share":0.5},"model":{"name":"tiny","tiny":{"hidden_size":64,"layers":2,"heads":4,"intermediate_size":128},"dtype":"auto","device":"auto","lora":null,"chat_template":"auto"},"warmstart":{"enabled":true,"steps":1000,"batch_size":32,"lr":0.003,"target_accuracy":0.4,"seed":0},"train":{"steps":2,"prompts_per_step":8,"max_new_tokens":8,"temperature":1.0,"eval_every":10,"eval_samples":4,"eval_pass_k":[],"max_eval_prompts":null,"threads":null,"micro_batch_size":null,"gradient_checkpointing":false,"mask_tool_tokens":true,"placebo_reward":false},"algorithm":{"name":"grpo","group_size":8,"lr":0.0001,"epochs":1,"minibatches":4,"max_grad_norm":1.0,"kind":"rl","advantage":"group_zscore","policy_loss":"clipped","aggregation":"seq_mean_token_mean","kl_estimator":"k3","kl_placement":"loss","critic":"none","old_logprobs":"auto","mismatch":"none","token_filter":"all","sampling":"once","truncated":"keep","entropy_coef":0.0,"eps_low":0.2,"eps_high":0.2,"dual_clip":null,"sapo_tau_pos":1.0,"sapo_tau_neg":1.05,"clip_cov_ratio":0.0002,"clip_cov_lb":1.0,"clip_cov_ub":5.0,"kl_cov_ratio":0.002,"kl_cov_coef":1.0,"dppo_ratio_cap":20.0,"adv_eps":0.0001,"whiten_advantages":false,"drop_degenerate":false,"gamma":1.0,"lam":0.95,"kl_coef":0.04,"mismatch_cap":2.0,"mismatch_floor":0.0,"entropy_top_share":0.2,"max_draws":4,"loss_norm_constant":null,"vf_coef":0.5,"value_clip":0.2,"critic_lr":null},"cache_dir":".cache/harness"},"status":"completed","error":null,"final":{"eval/accuracy":0.625},"history":[{"step":0,"train/reward_mean":0.625}],"wall_time_s":0.0,"started_at":"1970-01-01T00:00:00.000+00:00","finished_at":"1970-01-01T00:00:01.000+00:00","host":"vm","device":"cpu","git_commit":null,"harness_version":"0.1.0","harness_path":"/tmp/store_v0/src/harness","attempt":2,"phase":"compare"}','2026-12-04 23:26:09');
INSERT INTO harness_records VALUES(3,'release','b-s0-0b7aaf19',1,'completed','compare','6709d9419728a7ab','{"trial_id":"b-s0-0b7aaf19","study":"release","arm":"b","seed":0,"config_hash":"0b7aaf19fd6602bf","spec":{"study":"release","arm":"b","seed":0,"task":{"name":"addition","n_train":2000,"n_eval":128,"min_digits":1,"max_digits":2,"path":null,"eval_path":null,"reward":null,"tools":[],"max_turns":3,"tool_timeout_s":2.0,"describe_tools":true,"tool_reward":{"answer":1.0,"valid_call":0.1,"max_call_bonus":0.1,"call_bonus_needs_answer":false,"invalid_call":-0.2,"unclosed_tag":-0.2,"turn_limit":-0.5,"clip":3.0},"demo_share":0.5},"model":{"name":"tiny","tiny":{"hidden_size":64,"layers":2,"heads":4,"intermediate_size":128},"dtype":"auto","device":"auto","lora":null,"chat_template":"auto"},"warmstart":{"enabled":true,"steps":1000,"batch_size":32,"lr":0.003,"target_accuracy":0.4,"seed":0},"train":{"steps":2,"prompts_per_step":8,"max_new_tokens":8,"temperature":1.0,"eval_every":10,"eval_samples":4,"eval_pass_k":[],"max_eval_prompts":null,"threads":null,"micro_batch_size":null,"gradient_checkpointing":false,"mask_tool_tokens":true,"placebo_reward":false},"algorithm":{"name":"grpo","group_size":8,"lr":0.0001,"epochs":1,"minibatches":4,"max_grad_norm":1.0,"kind":"rl","advantage":"group_zscore","policy_loss":"clipped","aggregation":"seq_mean_token_mean","kl_estimator":"k3","kl_placement":"loss","critic":"none","old_logprobs":"auto","mismatch":"none","token_filter":"all","sampling":"once","truncated":"keep","entropy_coef":0.0,"eps_low":0.2,"eps_high":0.2,"dual_clip":null,"sapo_tau_pos":1.0,"sapo_tau_neg":1.05,"clip_cov_ratio":0.0002,"clip_cov_lb":1.0,"clip_cov_ub":5.0,"kl_cov_ratio":0.002,"kl_cov_coef":1.0,"dppo_ratio_cap":20.0,"adv_eps":0.0001,"whiten_advantages":false,"drop_degenerate":false,"gamma":1.0,"lam":0.95,"kl_coef":0.04,"mismatch_cap":2.0,"mismatch_floor":0.0,"entropy_top_share":0.2,"max_draws":4,"loss_norm_constant":null,"vf_coef":0.5,"value_clip":0.2,"critic_lr":null},"cache_dir":".cache/harness"},"status":"completed","error":null,"final":{"eval/accuracy":0.375},"history":[{"step":0,"train/reward_mean":0.375}],"wall_time_s":0.0,"started_at":"1970-01-01T00:00:00.000+00:00","finished_at":"1970-01-01T00:00:01.000+00:00","host":"vm","device":"cpu","git_commit":null,"harness_version":"0.1.0","harness_path":"/tmp/store_v0/src/harness","attempt":1,"phase":"compare"}','2026-12-04 23:26:09');
CREATE TABLE harness_sequential_rules (
	id INTEGER NOT NULL,
	study VARCHAR(512) NOT NULL,
	version INTEGER NOT NULL,
	rule TEXT NOT NULL,
	written_at DATETIME DEFAULT CURRENT_TIMESTAMP,
	PRIMARY KEY (id),
	CONSTRAINT uq_harness_sequential_rules_version UNIQUE (study, version)
);
INSERT INTO harness_sequential_rules VALUES(1,'release',1,'{"alpha": 0.05, "looks": [2, 4], "min_effect": 0.1}','2026-12-04 23:26:09');
CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name);
CREATE INDEX ix_trials_study_id ON trials (study_id);
COMMIT;
