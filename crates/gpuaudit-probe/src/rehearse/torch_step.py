# gpuaudit rehearse --torch: a short real training run of a model people quote, on synthetic
# data, on cuda:0 (gpuaudit sets CUDA_VISIBLE_DEVICES to the GPU it measures).
#
#   python3 -c SCRIPT MODEL BATCH SEQUENCE SECONDS
#
# MODEL: resnet50 (ImageNet-shaped images, 1000 classes) or bert-base (sequence
# classification, 2 classes). torchvision's ResNet-50 and transformers' BERT where they are
# installed; otherwise the same architectures from plain torch.nn (said in "built_from").
# Every line gpuaudit reads is one JSON object on a line of its own:
#   {"type": "timing"}                 the timed steps start
#   {"type": "result", ...}            the figures
#   {"type": "error", "error": "..."}  why there are none
import json
import sys
import time


def say(obj):
    sys.stdout.write("\n" + json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(msg):
    say({"type": "error", "error": msg})
    sys.exit(0)


try:
    import torch
    import torch.nn as nn
except Exception as e:  # noqa: BLE001 - any import failure is the answer
    fail("import torch: %s" % e)


def plain_resnet50():
    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, width, stride):
            super().__init__()
            out = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != out:
                self.down = nn.Sequential(
                    nn.Conv2d(cin, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
                )

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    layers = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def plain_bert_base(seq):
    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(30522, 768)
            self.pos = nn.Embedding(512, 768)
            self.norm = nn.LayerNorm(768)
            layer = nn.TransformerEncoderLayer(
                768, 12, 3072, dropout=0.1, activation="gelu", batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, 12)
            self.head = nn.Linear(768, 2)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.norm(self.tok(ids) + self.pos(pos))
            return self.head(self.encoder(x)[:, 0])

    return Bert()


def build(model, seq):
    if model == "resnet50":
        try:
            import torchvision

            return torchvision.models.resnet50(), "torchvision"
        except Exception:  # noqa: BLE001
            return plain_resnet50(), "plain torch.nn (torchvision not installed)"
    if model == "bert-base":
        try:
            from transformers import BertConfig, BertForSequenceClassification

            m = BertForSequenceClassification(BertConfig(num_labels=2))
            return m, "transformers"
        except Exception:  # noqa: BLE001
            return (
                plain_bert_base(seq),
                "plain torch.nn: 12 nn.TransformerEncoderLayer d=768 h=12 ff=3072 "
                "(transformers not installed)",
            )
    fail("unknown model %s" % model)


def main():
    model_name, batch, seq, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    if not torch.cuda.is_available():
        fail("torch sees no CUDA GPU (torch %s, built for CUDA %s)" % (torch.__version__, torch.version.cuda))
    dev = torch.device("cuda:0")
    torch.backends.cudnn.benchmark = True
    model, built = build(model_name, seq)
    model = model.to(dev)
    if torch.cuda.is_bf16_supported():
        dtype, precision = torch.bfloat16, "bf16 autocast"
    else:
        dtype, precision = torch.float16, "fp16 autocast"
    scaler = torch.cuda.amp.GradScaler() if dtype == torch.float16 else None
    if model_name == "resnet50":
        model = model.to(memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def forward():
            return model(x)
    else:
        x = torch.randint(0, 30522, (batch, seq), device=dev)
        y = torch.randint(0, 2, (batch,), device=dev)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5)

        def forward():
            out = model(x)
            return out.logits if hasattr(out, "logits") else out

    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            loss = loss_fn(forward(), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    say({"type": "timing"})
    steps = 0
    t0 = time.perf_counter()
    while True:
        for _ in range(5):
            step()
        steps += 5
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds and steps >= 10:
            break
    say(
        {
            "type": "result",
            "model": model_name,
            "samples_per_s": steps * batch / elapsed,
            "step_ms": elapsed / steps * 1e3,
            "steps": steps,
            "built_from": built,
            "precision": precision,
            "torch_version": torch.__version__,
        }
    )


try:
    main()
except SystemExit:
    raise
except Exception as e:  # noqa: BLE001 - the error is the answer
    fail("%s: %s" % (type(e).__name__, e))
