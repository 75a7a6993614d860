"""Front ends that turn other frameworks' models into a DinoML `Spec`.

`torch`: a `torch.nn.Module` (or a saved `torch.export` program) through `torch.export`;
ONNX files go through the C++ importer (`dinoml.onnx`). Importing this package imports neither
framework: `dinoml.frontends.torch` imports PyTorch when it is itself imported.
"""
