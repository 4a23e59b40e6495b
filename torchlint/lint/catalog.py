"""The built-in rules as a run reads them before it imports any
(`registry.all_rules`): code, name, on by default, in preview, options (by name in
torchlint.options), tokens and pattern (source, flags) of each: a run answered from the
cache, or a file that holds no rule's token, needs neither the rules nor libcst. Generated
from rules/ by `python -m torchlint.docs` (tests/test_docs.py fails when it is stale)."""

Pattern = tuple[str, int]
Entry = tuple[str, str, bool, bool, tuple[str, ...], tuple[str, ...], Pattern | None]

# fmt: off
CATALOG: tuple[Entry, ...] = (
    ("TL001", "small-batch-size", True, False, ("MIN_BATCH_SIZE", "TINY_NETWORK_BATCH_SIZE"), ("DataLoader", "auto_dataloader"), None),
    ("TL002", "default-batch-size", True, False, ("MIN_BATCH_SIZE",), ("DataLoader", "auto_dataloader"), None),
    ("TL101", "input-not-on-device", True, False, (), ("DataLoader",), None),
    ("TL102", "model-not-on-device", True, False, (), ("backward",), None),
    ("TL104", "cpu-tensor-then-moved", True, False, (), ("cuda", ".to("), ("\\((?:(?<=\\bByteTensor\\()|(?<=\\bDoubleTensor\\()|(?<=\\bFloatTensor\\()|(?<=\\bHalfTensor\\()|(?<=\\bIntTensor\\()|(?<=\\bLongTensor\\()|(?<=\\bTensor\\()|(?<=\\barange\\()|(?<=\\bas_tensor\\()|(?<=\\bempty\\()|(?<=\\bempty_like\\()|(?<=\\beye\\()|(?<=\\bfrom_numpy\\()|(?<=\\bfull\\()|(?<=\\bfull_like\\()|(?<=\\blinspace\\()|(?<=\\bones\\()|(?<=\\bones_like\\()|(?<=\\brand\\()|(?<=\\brand_like\\()|(?<=\\brandint\\()|(?<=\\brandint_like\\()|(?<=\\brandn\\()|(?<=\\brandn_like\\()|(?<=\\brandperm\\()|(?<=\\btensor\\()|(?<=\\bzeros\\()|(?<=\\bzeros_like\\())(?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)(?:(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bfloat16|contiguous|double|float|half|int|long)(?:[\\s\\\\]|#[^\\n]*\\n)*\\(\\s*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\.(?:[\\s\\\\]|#[^\\n]*\\n)*(?:bernoulli_|expand|exponential_|fill_|flatten|normal_|random_|repeat|reshape|squeeze|t|uniform_|unsqueeze|view|zero_)(?:[\\s\\\\]|#[^\\n]*\\n)*\\((?:[^()]|\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\))*\\)|(?:[\\s\\\\]|#[^\\n]*\\n)*\\))*(?:[\\s\\\\]|#[^\\n]*\\n)*(?:\\.[\\s\\\\]*|[ \\t]*\\n\\s*\\w+\\s*=\\s*\\w+\\s*\\.\\s*)(?:cuda|to|type_as)\\b|Tensor\\b(?:(?<=FloatTensor)|(?<=DoubleTensor)|(?<=HalfTensor)|(?<=BFloat16Tensor)|(?<=LongTensor)|(?<=IntTensor)|(?<=ShortTensor)|(?<=CharTensor)|(?<=ByteTensor)|(?<=BoolTensor))", 32)),
    ("TL105", "blocking-host-to-device-copy", True, False, (), ("DataLoader",), None),
    ("TL106", "torch-load-without-map-location", True, False, (), ("load(",), ("is_available|\\.(?:to|cuda)\\b|istributed", 32)),
    ("TL201", "dataloader-sync-loading", True, False, (), ("DataLoader", "auto_dataloader"), None),
    ("TL202", "dataloader-no-pin-memory", True, False, (), ("DataLoader", "auto_dataloader"), None),
    ("TL203", "dataloader-no-persistent-workers", True, False, (), ("DataLoader", "auto_dataloader"), None),
    ("TL204", "dataloader-worker-options-without-workers", True, False, (), ("DataLoader", "auto_dataloader"), None),
    ("TL205", "dataloader-iterated-to-count", True, False, (), ("len(list(", "len(tuple(", "len([", "sum(1 for"), None),
    ("TL206", "too-few-workers-for-decoding", True, False, ("MIN_DECODING_WORKERS",), ("DataLoader", "auto_dataloader"), None),
    ("TL301", "model-not-parallel", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL302", "prefer-distributed-data-parallel", True, False, (), ("DataParallel", "data_parallel"), None),
    ("TL303", "ddp-loader-without-distributed-sampler", True, False, (), ("DataParallel", "fully_shard", "FullyShardedDataParallel"), None),
    ("TL304", "distributed-sampler-without-set-epoch", True, False, (), ("DistributedSampler",), None),
    ("TL305", "ddp-accumulation-without-no-sync", True, False, (), ("DistributedDataParallel",), None),
    ("TL306", "ddp-find-unused-parameters", False, False, (), ("find_unused_parameters",), None),
    ("TL401", "host-sync-in-training-loop", True, False, (), ("backward", "training_step", "no_grad", "inference_mode", ".eval(", "def eval", "def val", "def test", "def predict", "def infer", "def _eval", "def _val"), ("backward(?<!def backward)\\s*\\(|training_step|no_grad|inference_mode|\\.eval\\(|def _*(?:eval|valid|val(?:_|\\d|\\()|predict|infer)|def _*test(?:_?(?:epoch|one_epoch|model|loop|step|net))?\\(", 32)),
    ("TL402", "empty-cache-in-loop", True, False, (), ("empty_cache",), None),
    ("TL403", "loss-accumulates-graph", True, False, (), ("backward",), None),
    ("TL404", "eval-without-no-grad", True, False, (), ("DataLoader", ".backward("), None),
    ("TL405", "zero-grad-keeps-zeros", True, False, (), ("zero_grad",), None),
    ("TL406", "anomaly-detection-in-training", True, False, (), ("detect_anomaly",), None),
    ("TL407", "profiler-around-training", True, False, (), ("profiler",), ("backward", 32)),
    ("TL408", "gradcheck-in-training-loop", True, False, (), ("gradcheck",), None),
    ("TL409", "cuda-launch-blocking", True, False, (), ("CUDA_LAUNCH_BLOCKING",), None),
    ("TL410", "training-set-reevaluated", True, False, (), ("backward", "EPOCH_COMPLETED"), None),
    ("TL411", "per-parameter-loop", True, False, (), ("parameters()", "buffers()", "state_dict()"), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL412", "discriminator-step-backprops-generator", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL413", "busy-wait-beside-training", True, False, (), ("Thread", "start_new_thread"), ("backward|step\\(|\\.fit\\(|\\.train\\(|LightningCLI", 32)),
    ("TL414", "untrained-network-gets-gradients", True, False, (), ("backward",), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL501", "training-without-mixed-precision", True, False, (), ("cuda", "accelerator"), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL502", "deprecated-cuda-amp-api", True, False, (), ("cuda.amp", "cpu.amp", "cuda import", "cpu import"), None),
    ("TL503", "float32-matmul-precision", False, False, (), ("cuda", "accelerator"), None),
    ("TL601", "cudnn-benchmark-off", True, False, (), ("Conv", "torchvision"), ("backward|step\\(|create_supervised_trainer", 32)),
    ("TL602", "deterministic-in-training", False, False, (), ("deterministic",), None),
    ("TL603", "bias-before-batch-norm", True, False, (), ("BatchNorm", "InstanceNorm"), ("(?:Conv(?:Transpose)?[123]d|Linear)(?!\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*?(?:\\bbias\\s*=\\s*False|,\\s*\\*\\*))\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\)\\s*,\\s*(?:#[^\\n]*\\s*)*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|append\\(\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)|\\A(?=(?s:.*?)self\\.\\w+\\s*=\\s*[\\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm))(?=(?s:.*?)(?:self\\.\\w+\\(\\s*self\\.\\w+\\(|\\b(\\w+)\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)\\s*\\n\\s*\\1\\s*=\\s*self\\.\\w+\\(\\s*\\1\\s*\\)))", 32)),
    ("TL604", "channels-last-not-used", False, False, (), ("Conv2d", "torchvision"), None),
    ("TL605", "optimizer-not-fused", False, False, (), ("Adam", "SGD"), None),
    ("TL606", "model-not-compiled", False, False, (), ("cuda", "accelerator"), None),
    ("TL607", "compiled-model-unused", True, False, (), ("torch.compile", "import compile"), None),
    ("TL608", "hand-written-attention", True, False, (), ("softmax", "Softmax"), ("transpose|permute|\\.mT|\\.T\\b|\\.t\\(\\)|einsum|bmm", 32)),
    ("TL609", "generation-without-kv-cache", True, False, (), ("cat(", "concat", "use_cache"), None),
    ("TL701", "hf-dataloader-sync-loading", True, False, (), ("TrainingArguments",), None),
    ("TL702", "hf-dataloader-no-pin-memory", False, False, (), ("dataloader_pin_memory",), None),
    ("TL703", "hf-training-without-mixed-precision", True, False, (), ("TrainingArguments",), None),
    ("TL704", "hf-small-batch-size", False, False, ("MIN_BATCH_SIZE",), ("TrainingArguments",), None),
    ("TL705", "hf-gradient-accumulation-small-batch", False, False, ("MIN_BATCH_SIZE",), ("gradient_accumulation_steps",), None),
    ("TL706", "tokenizer-pads-to-max-length", True, False, (), ("max_length", "batch_size=None"), None),
    ("TL707", "adapter-base-in-fp32", False, False, (), ("peft", "PeftModel", "add_adapter", "load_adapter", "peft_config"), ("from_pretrained", 32)),
    ("TL721", "lightning-full-precision", False, False, (), ("Trainer",), None),
    ("TL722", "lightning-single-device", False, False, (), ("Trainer",), None),
    ("TL723", "lightning-data-parallel", True, False, (), ("\"dp\"", "'dp'", "DataParallelStrategy"), None),
    ("TL904", "unused-noqa", False, False, (), ("noqa", "NOQA"), ("#\\s*noqa:[\\s,A-Z0-9]*?\\bTL[0-9]", 34)),
)
# fmt: on
