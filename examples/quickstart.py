"""A two-layer MLP on tinycuda modules, one training step, checked against
plain torch.nn with the same weights."""
import torch

import tinycuda

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
ours = torch.nn.Sequential(tinycuda.nn.Linear(784, 256), tinycuda.nn.ReLU(), tinycuda.nn.Linear(256, 10)).to(device)
ref = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
ref.load_state_dict(ours.state_dict())  # same keys: a drop-in

x = torch.randn(64, 784, device=device)
target = torch.randint(0, 10, (64,), device=device)
for name, model in (("tinycuda", ours), ("torch.nn", ref)):
    loss = torch.nn.functional.cross_entropy(model(x), target)
    loss.backward()
    print(f"{name:9s} loss {loss.item():.6f}  |grad W1| {model[0].weight.grad.norm().item():.6f}")
print(f"max |dW1| difference: {(ours[0].weight.grad - ref[0].weight.grad).abs().max().item():.2e} on {device}")
