"""The built-in rules as a run reads them before it imports any
(`registry.all_rules`): code, name, on by default, in preview, options (by name in
torchlint.options), tokens, pattern (source, flags) and the fingerprint of its module's
text of each: a run answered from the cache, or a file that holds no rule's token, needs
neither the rules nor libcst. An entry counts while its module's text, and that of
torchlint/rule.py, are those it was generated from; a rule added or edited since is
imported at start. Generated from rules/ by `python -m torchlint.docs`
(tests/test_docs.py fails when it is stale)."""

Pattern = tuple[str, int]
Entry = tuple[str, str, bool, bool, tuple[str, ...], tuple[str, ...], Pattern | None, str]

RULE_API_FINGERPRINT = "bc758cb299a14e42"

# fmt: off
CATALOG: tuple[Entry, ...] = (
    ("TL001", "small-batch-size", True, False, ("MIN_BATCH_SIZE", "TINY_NETWORK_BATCH_SIZE"), ("DataLoader", "auto_dataloader"), None, "4be5b833174dc1e6"),
    ("TL002", "default-batch-size", True, False, ("MIN_BATCH_SIZE",), ("DataLoader", "auto_dataloader"), None, "d66b6b2c56236d3e"),
    ("TL101", "input-not-on-device", True, False, (), ("DataLoader",), None, "2ea756331539ae38"),
    ("TL102", "model-not-on-device", True, False, (), ("backward",), None, "b95f7694ba1ccd1a"),
    ("TL104", "cpu-tensor-then-moved", True, False, (), ("cuda", ".to("), ("\\((?:(?<=\\bByteTensor\\()|(?<=\\bDoubleTensor\\()|(?<=\\bFloatTensor\\()|(?<=\\bHalfTensor\\()|(?<=\\bIntTensor\\()|(?<=\\bLongTensor\\()|(?<=\\bTensor\\()|(?<=\\barange\\()|(?<=\\bas_tensor\\()|(?<=\\bempty\\()|(?<=\\bempty_like\\()|(?<=\\beye\\()|(?<=\\bfrom_numpy\\()|(?<=\\bfull\\()|(?<=\\bfull_like\\()|(?<=\\blinspace\\()|(?<=\\bones\\()|(?<=\\bones_like\\()|(?<=\\brand\\()|(?<=\\brand_like\\()|(?<=\\brandint\\()|(?<=\\brandint_like\\()|(?<=\\brandn\\()|(?<=\\brandn_like\\()|(?<=\\brandperm\\()|(?<=\\btensor\\()|(?<=\\bzeros\\()|(?<=\\bzeros_like\\())(?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)(?:(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bfloat16|contiguous|double|float|half|int|long)(?:[\\s\\\\]|#[^\\n]*\\n)*\\(\\s*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bernoulli_|expand|exponential_|fill_|flatten|normal_|random_|repeat|reshape|squeeze|t|uniform_|unsqueeze|view|zero_)(?:[\\s\\\\]|#[^\\n]*\\n)*\\((?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\))*(?:[\\s\\\\]|#[^\\n]*\\n)*(?:\\.[\\s\\\\]*|[ \\t]*\\n\\s*\\w+\\s*=\\s*\\w+\\s*\\.\\s*)(?:cuda|to|type_as)\\b|Tensor\\b(?:(?<=FloatTensor)|(?<=DoubleTensor)|(?<=HalfTensor)|(?<=BFloat16Tensor)|(?<=LongTensor)|(?<=IntTensor)|(?<=ShortTensor)|(?<=CharTensor)|(?<=ByteTensor)|(?<=BoolTensor))", 32), "f27b496b07ce3d18"),
    ("TL105", "blocking-host-to-device-copy", True, False, (), ("DataLoader",), None, "ea99e05376baac08"),
    ("TL106", "torch-load-without-map-location", True, False, (), ("load(",), ("is_available|\\.(?:to|cuda)\\b|istributed", 32), "42c7b2b31a34b2f5"),
    ("TL201", "dataloader-sync-loading", True, False, (), ("DataLoader", "auto_dataloader"), None, "c3aad3621161c9b9"),
    ("TL202", "dataloader-no-pin-memory", True, False, (), ("DataLoader", "auto_dataloader"), None, "da29d7453499b59d"),
    ("TL203", "dataloader-no-persistent-workers", True, False, (), ("DataLoader", "auto_dataloader"), None, "8cf03cf507292fe1"),
    ("TL204", "dataloader-worker-options-without-workers", True, False, (), ("DataLoader", "auto_dataloader"), None, "e5452e46cd34ee6a"),
    ("TL205", "dataloader-iterated-to-count", True, False, (), ("len(list(", "len(tuple(", "len([", "sum(1 for"), None, "94a65e5d3a1940a1"),
    ("TL206", "too-few-workers-for-decoding", True, False, ("MIN_DECODING_WORKERS",), ("DataLoader", "auto_dataloader"), None, "b88a81fd8e3d0af0"),
    ("TL301", "model-not-parallel", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32), "7df4673d1a46ef3f"),
    ("TL302", "prefer-distributed-data-parallel", True, False, (), ("DataParallel", "data_parallel"), None, "f099128c8de72c57"),
    ("TL303", "ddp-loader-without-distributed-sampler", True, False, (), ("DataParallel", "fully_shard", "FullyShardedDataParallel"), None, "cc38df0430170881"),
    ("TL304", "distributed-sampler-without-set-epoch", True, False, (), ("DistributedSampler",), None, "0bfb3612b03696f7"),
    ("TL305", "ddp-accumulation-without-no-sync", True, False, (), ("DistributedDataParallel",), None, "afa1efe89dbd63eb"),
    ("TL306", "ddp-find-unused-parameters", False, False, (), ("find_unused_parameters",), None, "edc9ebe40866be96"),
    ("TL401", "host-sync-in-training-loop", True, False, (), ("backward", "training_step", "no_grad", "inference_mode", ".eval(", "def eval", "def val", "def test", "def predict", "def infer", "def _eval", "def _val"), ("backward(?<!def backward)\\s*\\(|training_step|no_grad|inference_mode|\\.eval\\(|def _*(?:eval|valid|val(?:_|\\d|\\()|predict|infer)|def _*test(?:_?(?:epoch|one_epoch|model|loop|step|net))?\\(", 32), "d811850f2e489771"),
    ("TL402", "empty-cache-in-loop", True, False, (), ("empty_cache",), None, "cc18011983548ce6"),
    ("TL403", "loss-accumulates-graph", True, False, (), ("backward",), None, "c9854011a1c5c277"),
    ("TL404", "eval-without-no-grad", True, False, (), ("DataLoader", ".backward("), None, "9d21264589ebc314"),
    ("TL405", "zero-grad-keeps-zeros", True, False, (), ("zero_grad",), None, "406446b1356bb700"),
    ("TL406", "anomaly-detection-in-training", True, False, (), ("detect_anomaly",), None, "710c0bea91b4c707"),
    ("TL407", "profiler-around-training", True, False, (), ("profiler",), ("backward", 32), "a17e8bb6cfe36500"),
    ("TL408", "gradcheck-in-training-loop", True, False, (), ("gradcheck",), None, "714ff5f7305b0d1e"),
    ("TL409", "cuda-launch-blocking", True, False, (), ("CUDA_LAUNCH_BLOCKING",), None, "684e08f749fdf927"),
    ("TL410", "training-set-reevaluated", True, False, (), ("backward", "EPOCH_COMPLETED"), None, "890bbde96c762749"),
    ("TL411", "per-parameter-loop", True, False, (), ("parameters()", "buffers()", "state_dict()"), ("backward|step\\(|create_supervised_trainer", 32), "d053f1a57897d18c"),
    ("TL412", "discriminator-step-backprops-generator", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32), "6f76225d201640cb"),
    ("TL413", "busy-wait-beside-training", True, False, (), ("Thread", "start_new_thread"), ("backward|step\\(|\\.fit\\(|\\.train\\(|LightningCLI", 32), "2d9b3641488c3099"),
    ("TL414", "untrained-network-gets-gradients", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32), "1c49ee60844a98ce"),
    ("TL415", "frozen-features-recomputed", True, False, (), ("eval()",), ("backward|step\\(|create_supervised_trainer", 32), "856b47ad84ac65c7"),
    ("TL501", "training-without-mixed-precision", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32), "405a78c8b5f3054c"),
    ("TL502", "deprecated-cuda-amp-api", True, False, (), ("cuda.amp", "cpu.amp", "cuda import", "cpu import"), None, "ca55ac0dbfde8434"),
    ("TL503", "float32-matmul-precision", False, False, (), ("cuda", "accelerator"), None, "4085b7f866e74c86"),
    ("TL504", "frozen-network-outside-autocast", True, False, (), ("autocast",), ("backward|step\\(|create_supervised_trainer", 32), "0dd7d2fc4296d4da"),
    ("TL601", "cudnn-benchmark-off", True, False, (), ("Conv", "torchvision"), ("backward|step\\(|create_supervised_trainer", 32), "c2d5aa14cc1394f7"),
    ("TL602", "deterministic-in-training", False, False, (), ("deterministic",), None, "a71707c5b7c78bf1"),
    ("TL603", "bias-before-batch-norm", True, False, (), ("BatchNorm", "InstanceNorm"), ("(?:Conv(?:Transpose)?[123]d|Linear)(?!\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*?(?:\\bbias\\s*=\\s*False|,\\s*\\*\\*))\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\)\\s*,\\s*(?:#[^\\n]*\\s*)*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|append\\(\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|\\A(?=(?s:.*?)self\\.\\w+\\s*=\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm))(?=(?s:.*?)(?:self\\.\\w+\\(\\s*self\\.\\w+\\(|\\b(\\w+)\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)\\s*\\n\\s*\\1\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)))", 32), "4337e1465ab5ae5e"),
    ("TL604", "channels-last-not-used", False, False, (), ("Conv2d", "torchvision"), None, "64c50bea36ecb705"),
    ("TL605", "optimizer-not-fused", False, False, (), ("Adam", "SGD"), None, "4ae3ad1f73880716"),
    ("TL606", "model-not-compiled", False, False, (), ("cuda", "accelerator"), None, "63e43eb05ef79397"),
    ("TL607", "compiled-model-unused", True, False, (), ("torch.compile", "import compile"), None, "1d51628f6d7a6aa4"),
    ("TL608", "hand-written-attention", True, False, (), ("softmax", "Softmax"), ("transpose|permute|\\.mT|\\.T\\b|\\.t\\(\\)|einsum|bmm", 32), "ca7e70567747fe48"),
    ("TL609", "generation-without-kv-cache", True, False, (), ("cat(", "concat", "use_cache"), None, "09baaf30dab343cc"),
    ("TL701", "hf-dataloader-sync-loading", True, False, (), ("TrainingArguments",), None, "f89708616bbd9ecd"),
    ("TL702", "hf-dataloader-no-pin-memory", False, False, (), ("dataloader_pin_memory",), None, "9a6ec416032ea77b"),
    ("TL703", "hf-training-without-mixed-precision", True, False, (), ("TrainingArguments",), None, "4b1c8f72001de281"),
    ("TL704", "hf-small-batch-size", False, False, ("MIN_BATCH_SIZE",), ("TrainingArguments",), None, "23c6afb56b453783"),
    ("TL705", "hf-gradient-accumulation-small-batch", False, False, ("MIN_BATCH_SIZE",), ("gradient_accumulation_steps",), None, "00c8a4375582fbf6"),
    ("TL706", "tokenizer-pads-to-max-length", True, False, (), ("max_length", "batch_size=None"), None, "d1d515abfad9ee2b"),
    ("TL707", "adapter-base-in-fp32", False, False, (), ("peft", "PeftModel", "add_adapter", "load_adapter", "peft_config"), ("from_pretrained", 32), "3dfcea2c203be179"),
    ("TL721", "lightning-full-precision", False, False, (), ("Trainer",), None, "cccac2f6e1f241c5"),
    ("TL722", "lightning-single-device", False, False, (), ("Trainer",), None, "04750f2cc1e57a1d"),
    ("TL723", "lightning-data-parallel", True, False, (), ("\"dp\"", "'dp'", "DataParallelStrategy"), None, "adb6b64076ab8413"),
    ("TL904", "unused-noqa", False, False, (), ("noqa", "NOQA"), ("#\\s*noqa:[\\s,A-Z0-9]*?\\bTL[0-9]", 34), "445545366c8b1381"),
)
# fmt: on
