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

RULE_API_FINGERPRINT = "337234ba9ebae06f"

# fmt: off
CATALOG: tuple[Entry, ...] = (
    ("TL001", "small-batch-size", True, False, ("MIN_BATCH_SIZE", "TINY_NETWORK_BATCH_SIZE"), ("DataLoader", "auto_dataloader"), None, "4192519feebf8e57"),
    ("TL002", "default-batch-size", True, False, ("MIN_BATCH_SIZE",), ("DataLoader", "auto_dataloader"), None, "eb504b6fb3090809"),
    ("TL101", "input-not-on-device", True, False, (), ("DataLoader",), None, "5bde7a78945431cd"),
    ("TL102", "model-not-on-device", True, False, (), ("backward",), None, "3877b2afbefa5f88"),
    ("TL104", "cpu-tensor-then-moved", True, False, (), ("cuda", ".to("), ("\\((?:(?<=\\bByteTensor\\()|(?<=\\bDoubleTensor\\()|(?<=\\bFloatTensor\\()|(?<=\\bHalfTensor\\()|(?<=\\bIntTensor\\()|(?<=\\bLongTensor\\()|(?<=\\bTensor\\()|(?<=\\barange\\()|(?<=\\bas_tensor\\()|(?<=\\bempty\\()|(?<=\\bempty_like\\()|(?<=\\beye\\()|(?<=\\bfrom_numpy\\()|(?<=\\bfull\\()|(?<=\\bfull_like\\()|(?<=\\blinspace\\()|(?<=\\bones\\()|(?<=\\bones_like\\()|(?<=\\brand\\()|(?<=\\brand_like\\()|(?<=\\brandint\\()|(?<=\\brandint_like\\()|(?<=\\brandn\\()|(?<=\\brandn_like\\()|(?<=\\brandperm\\()|(?<=\\btensor\\()|(?<=\\bzeros\\()|(?<=\\bzeros_like\\())(?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)(?:(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bfloat16|contiguous|double|float|half|int|long)(?:[\\s\\\\]|#[^\\n]*\\n)*\\(\\s*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bernoulli_|expand|exponential_|fill_|flatten|normal_|random_|repeat|reshape|squeeze|t|uniform_|unsqueeze|view|zero_)(?:[\\s\\\\]|#[^\\n]*\\n)*\\((?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\))*(?:[\\s\\\\]|#[^\\n]*\\n)*(?:\\.[\\s\\\\]*|[ \\t]*\\n\\s*\\w+\\s*=\\s*\\w+\\s*\\.\\s*)(?:cuda|to|type_as)\\b|Tensor\\b(?:(?<=FloatTensor)|(?<=DoubleTensor)|(?<=HalfTensor)|(?<=BFloat16Tensor)|(?<=LongTensor)|(?<=IntTensor)|(?<=ShortTensor)|(?<=CharTensor)|(?<=ByteTensor)|(?<=BoolTensor))", 32), "a23efaf9d8b2743a"),
    ("TL105", "blocking-host-to-device-copy", True, False, (), ("DataLoader",), None, "54a454c4dd291088"),
    ("TL106", "torch-load-without-map-location", True, False, (), ("load(",), ("is_available|\\.(?:to|cuda)\\b|istributed", 32), "db59855bfd83d013"),
    ("TL201", "dataloader-sync-loading", True, False, (), ("DataLoader", "auto_dataloader"), None, "a86c15849553c0ac"),
    ("TL202", "dataloader-no-pin-memory", True, False, (), ("DataLoader", "auto_dataloader"), None, "8c4685984b917fd4"),
    ("TL203", "dataloader-no-persistent-workers", True, False, (), ("DataLoader", "auto_dataloader"), None, "00fc535a067f578f"),
    ("TL204", "dataloader-worker-options-without-workers", True, False, (), ("DataLoader", "auto_dataloader"), None, "ad5e446c4bebd3fb"),
    ("TL205", "dataloader-iterated-to-count", True, False, (), ("len(list(", "len(tuple(", "len([", "sum(1 for"), None, "5e2892ce7bde8231"),
    ("TL206", "too-few-workers-for-decoding", True, False, ("MIN_DECODING_WORKERS",), ("DataLoader", "auto_dataloader"), None, "e2a104adc0debe4e"),
    ("TL301", "model-not-parallel", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32), "8329883c0da182b9"),
    ("TL302", "prefer-distributed-data-parallel", True, False, (), ("DataParallel", "data_parallel"), None, "38653d92a7827cb5"),
    ("TL303", "ddp-loader-without-distributed-sampler", True, False, (), ("DataParallel", "fully_shard", "FullyShardedDataParallel"), None, "7dcf3222011c13e5"),
    ("TL304", "distributed-sampler-without-set-epoch", True, False, (), ("DistributedSampler",), None, "955a703f3304151c"),
    ("TL305", "ddp-accumulation-without-no-sync", True, False, (), ("DistributedDataParallel",), None, "9508bcb77cca62ac"),
    ("TL306", "ddp-find-unused-parameters", False, False, (), ("find_unused_parameters",), None, "edc9ebe40866be96"),
    ("TL401", "host-sync-in-training-loop", True, False, (), ("backward", "training_step", "no_grad", "inference_mode", ".eval(", "def eval", "def val", "def test", "def predict", "def infer", "def _eval", "def _val"), ("backward(?<!def backward)\\s*\\(|training_step|no_grad|inference_mode|\\.eval\\(|def _*(?:eval|valid|val(?:_|\\d|\\()|predict|infer)|def _*test(?:_?(?:epoch|one_epoch|model|loop|step|net))?\\(", 32), "4516992c7a369a93"),
    ("TL402", "empty-cache-in-loop", True, False, (), ("empty_cache",), None, "cc18011983548ce6"),
    ("TL403", "loss-accumulates-graph", True, False, (), ("backward",), None, "0b5f34abbe2cbbfb"),
    ("TL404", "eval-without-no-grad", True, False, (), ("DataLoader", ".backward(", "volatile"), None, "c011df65cdc03f03"),
    ("TL405", "zero-grad-keeps-zeros", True, False, (), ("zero_grad",), None, "406446b1356bb700"),
    ("TL406", "anomaly-detection-in-training", True, False, (), ("detect_anomaly",), None, "8a7cdbcf1e59e8ab"),
    ("TL407", "profiler-around-training", True, False, (), ("profiler",), ("backward", 32), "866be4b04d558ccc"),
    ("TL408", "gradcheck-in-training-loop", True, False, (), ("gradcheck",), None, "27e720099b7314eb"),
    ("TL409", "cuda-launch-blocking", True, False, (), ("CUDA_LAUNCH_BLOCKING",), None, "82800e69cbe7a761"),
    ("TL410", "training-set-reevaluated", True, False, (), ("backward", "EPOCH_COMPLETED"), None, "575efa4272263a0e"),
    ("TL411", "per-parameter-loop", True, False, (), ("parameters()", "buffers()", "state_dict()"), ("backward|step\\(|create_supervised_trainer", 32), "3df8ac2f515bcfb3"),
    ("TL412", "discriminator-step-backprops-generator", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32), "233d9252ffa71a7e"),
    ("TL413", "busy-wait-beside-training", True, False, (), ("Thread", "start_new_thread"), ("backward|step\\(|\\.fit\\(|\\.train\\(|LightningCLI", 32), "c02a1332b39f0d72"),
    ("TL414", "untrained-network-gets-gradients", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32), "db8df94a76082335"),
    ("TL415", "frozen-features-recomputed", True, False, (), ("eval()",), ("backward|step\\(|create_supervised_trainer", 32), "0ef7a5a081229f55"),
    ("TL501", "training-without-mixed-precision", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32), "089d52ee27a49290"),
    ("TL502", "deprecated-cuda-amp-api", True, False, (), ("cuda.amp", "cpu.amp", "cuda import", "cpu import"), None, "8bb92d339eab68c0"),
    ("TL503", "float32-matmul-precision", False, False, (), ("cuda", "accelerator"), None, "94c5bf81bf7003a3"),
    ("TL504", "frozen-network-outside-autocast", True, False, (), ("autocast",), ("backward|step\\(|create_supervised_trainer", 32), "f909a9fa2eb79b3f"),
    ("TL601", "cudnn-benchmark-off", True, False, (), ("Conv", "torchvision"), ("backward|step\\(|create_supervised_trainer", 32), "7a177ca792b6f1e4"),
    ("TL602", "deterministic-in-training", False, False, (), ("deterministic",), None, "75e032ee21d44c1c"),
    ("TL603", "bias-before-batch-norm", True, False, (), ("BatchNorm", "InstanceNorm"), ("(?:Conv(?:Transpose)?[123]d|Linear)(?!\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*?(?:\\bbias\\s*=\\s*False|,\\s*\\*\\*))\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\)\\s*,\\s*(?:#[^\\n]*\\s*)*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|append\\(\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|\\A(?=(?s:.*?)self\\.\\w+\\s*=\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm))(?=(?s:.*?)(?:self\\.\\w+\\(\\s*self\\.\\w+\\(|\\b(\\w+)\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)\\s*\\n\\s*\\1\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)))", 32), "7016eed327859bff"),
    ("TL604", "channels-last-not-used", False, False, (), ("Conv2d", "torchvision"), None, "a4b05f5e905b9f5c"),
    ("TL605", "optimizer-not-fused", False, False, (), ("Adam", "SGD"), None, "0f364ec74f6dfce1"),
    ("TL606", "model-not-compiled", False, False, (), ("cuda", "accelerator"), None, "7907eaca64ac4d95"),
    ("TL607", "compiled-model-unused", True, False, (), ("torch.compile", "import compile"), None, "01bcce080fef390d"),
    ("TL608", "hand-written-attention", True, False, (), ("softmax", "Softmax"), ("transpose|permute|\\.mT|\\.T\\b|\\.t\\(\\)|einsum|bmm", 32), "c206211514aee59b"),
    ("TL609", "generation-without-kv-cache", True, False, (), ("cat(", "concat", "use_cache"), None, "f98300d654e2369d"),
    ("TL701", "hf-dataloader-sync-loading", True, False, (), ("TrainingArguments",), None, "737104848e1c8904"),
    ("TL702", "hf-dataloader-no-pin-memory", False, False, (), ("dataloader_pin_memory",), None, "a8888d9709dbb0c6"),
    ("TL703", "hf-training-without-mixed-precision", True, False, (), ("TrainingArguments",), None, "b7a96828155514db"),
    ("TL704", "hf-small-batch-size", False, False, ("MIN_BATCH_SIZE",), ("TrainingArguments",), None, "d69505c18d505100"),
    ("TL705", "hf-gradient-accumulation-small-batch", False, False, ("MIN_BATCH_SIZE",), ("gradient_accumulation_steps",), None, "1218612c3426310f"),
    ("TL706", "tokenizer-pads-to-max-length", True, False, (), ("max_length", "batch_size=None"), None, "d1d515abfad9ee2b"),
    ("TL707", "adapter-base-in-fp32", False, False, (), ("peft", "PeftModel", "add_adapter", "load_adapter", "peft_config"), ("from_pretrained", 32), "33a91be0b22ef8bc"),
    ("TL721", "lightning-full-precision", False, False, (), ("Trainer",), None, "b398b9dc21c9f5d9"),
    ("TL722", "lightning-single-device", False, False, (), ("Trainer",), None, "90319d92396ba719"),
    ("TL723", "lightning-data-parallel", True, False, (), ("\"dp\"", "'dp'", "DataParallelStrategy"), None, "adb6b64076ab8413"),
    ("TL904", "unused-noqa", False, False, (), ("noqa", "NOQA"), ("#\\s*noqa:[\\s,A-Z0-9]*?\\bTL[0-9]", 34), "445545366c8b1381"),
)
# fmt: on
