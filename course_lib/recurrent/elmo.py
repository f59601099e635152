"""Chapter 4: ELMo-style contextual embeddings from a bidirectional LSTM language model.

ELMo (Peters et al., 2018) trains a forward and a backward LSTM language model
that share their token embeddings and softmax. The representation of token
``k`` at layer ``j`` is ``h_{k,j} = [h_fwd_{k,j} ; h_bwd_{k,j}]`` (layer 0 is the
token embedding, used for both halves), and a task learns its own mix of the
layers:

``ELMo_k = gamma * sum_j s_j h_{k,j}``, with ``s = softmax(w)``.

Exercise of assignment ps04 here: ``scalar_mix``. The biLM takes the cell
function and the bidirectional function as arguments, so an assignment can
train it with its own. See :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.progress import progress_bar
from course_lib.recurrent.cells import LSTMCell
from course_lib.recurrent.layers import Recurrent, bidirectional
from course_lib.text.vocabulary import Vocabulary
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed


def scalar_mix(layers, weights, gamma):
    """ELMo's task-weighted mix of the layers: ``gamma * sum_j softmax(w)_j h_j``.

    The softmax must not overflow: weights of +-1000 give a finite mix
    (``torch.softmax`` subtracts the largest weight; ``exp`` of the raw weights
    overflows). Written with torch operations only, ``gamma`` kept a tensor, so
    that autograd gives the gradients with respect to ``layers``, ``weights`` and
    ``gamma``; the arguments are not modified. Chapter 4, exercise of ps04.

    Args:
        layers: ``(L + 1, ...)`` tensor with at least one axis after the first: the
            representations of every layer stacked on the first axis, e.g.
            ``(L + 1, B, T, 2H)`` from :meth:`BiLanguageModel.layers`.
        weights: ``(L + 1,)`` unnormalized layer weights ``w``; ``s = softmax(w)``.
        gamma: scalar tensor (shape ``()`` or ``(1,)``), the overall scale.

    Returns:
        tensor of the shape of ``layers[0]``, ``(...)``, and of its dtype: ``gamma * sum_j s_j layers[j]``.
    """
    if not all(isinstance(t, torch.Tensor) for t in (layers, weights, gamma)):
        raise TypeError("layers, weights and gamma must be torch tensors")
    if layers.dim() < 2 or weights.shape != (layers.shape[0],):
        raise ValueError(f"weights must have shape ({layers.shape[0] if layers.dim() else '?'},), one per layer "
                         f"of layers {tuple(layers.shape)}; got {tuple(weights.shape)}")
    if gamma.numel() != 1:
        raise ValueError(f"gamma must be a single number, got shape {tuple(gamma.shape)}")
    ### BEGIN SOLUTION
    s = torch.softmax(weights, dim=0)  # (L + 1,)
    return gamma.reshape(()) * torch.tensordot(s, layers, dims=1)  # (...), the shape of layers[0]
    ### END SOLUTION


class ScalarMix(nn.Module):
    """Learned ``w`` (zeros: an equal mix) and ``gamma`` (1) for :func:`scalar_mix`. Chapter 4.

    Args:
        num_layers: ``L + 1``, the number of representations mixed.
        mix_fn: the mixing function (default :func:`scalar_mix`).
    """

    def __init__(self, num_layers: int, mix_fn: Callable = scalar_mix):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(checks.positive_int(num_layers, "num_layers")))
        self.gamma = nn.Parameter(torch.ones(()))
        self.mix_fn = mix_fn

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """The mix of ``layers``, ``(L + 1, ...)``: a tensor of the shape of ``layers[0]``."""
        return self.mix_fn(layers, self.weights, self.gamma)

    def layer_weights(self) -> np.ndarray:
        """``s = softmax(w)``, ``(L + 1,)``."""
        return torch.softmax(self.weights.detach(), dim=0).numpy()


class DirectionStack(nn.Module):
    """``L`` one-direction LSTM layers whose outputs are all kept: ``(B, T, L, H)``. Chapter 4.

    With ``residual``, every layer above the first adds its input to its output,
    ``h_{j+1} = LSTM_{j+1}(h_j) + h_j``, as ELMo does between its layers: the
    signal then reaches the top of the stack at full size from the first step of
    training. Called as ``stack(x, lengths)`` like a layer, so that
    :func:`~course_lib.recurrent.layers.bidirectional` can run it both ways.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float,
                 cell_fn: Callable | None = None, residual: bool = True):
        super().__init__()
        self.layers = nn.ModuleList(Recurrent(LSTMCell(input_size if i == 0 else hidden_size, hidden_size, cell_fn))
                                    for i in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        self.residual = residual

    def forward(self, x: torch.Tensor, lengths=None):
        """``x`` ``(B, T, I)`` to ``(outputs (B, T, L, H), [final state of each layer])``."""
        outputs, finals = [], []
        for number, layer in enumerate(self.layers):
            out, final = layer(self.dropout(x) if number else x, lengths)  # (B, T, H), zero past each length
            x = out + x if self.residual and number else out
            outputs.append(x)
            finals.append(final)
        return torch.stack(outputs, dim=2), finals


class BiLanguageModel(nn.Module):
    """A small ELMo: forward and backward LSTM language models with shared embedding and softmax. Chapter 4.

    The forward stack reads ``x_1..x_t`` and predicts ``x_{t+1}``; the backward
    stack reads ``x_T..x_t`` and predicts ``x_{t-1}``. Layer ``j`` of token
    ``t`` is ``[h_fwd_{t,j} ; h_bwd_{t,j}]``, of size ``2H``; layer 0 is the
    embedding ``[e_t ; e_t]``.

    Args:
        vocab_size: ``V``.
        hidden_size: ``H``, also the embedding size.
        num_layers: ``L`` LSTM layers per direction.
        dropout: dropout on the embeddings, between layers and before the softmax.
        cell_fn: the LSTM cell function (default: the reference ``lstm_cell``).
        bidirectional_fn: the function that runs the two stacks (default: the reference ``bidirectional``).
        residual: add each layer's input to its output above the first layer (ELMo's residual connection).
    """

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int = 2, dropout: float = 0.1,
                 cell_fn: Callable | None = None, bidirectional_fn: Callable = bidirectional,
                 residual: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.forward_stack = DirectionStack(hidden_size, hidden_size, num_layers, dropout, cell_fn, residual)
        self.backward_stack = DirectionStack(hidden_size, hidden_size, num_layers, dropout, cell_fn, residual)
        self.readout = nn.Linear(hidden_size, vocab_size)  # the softmax, shared by both directions
        self.dropout = nn.Dropout(dropout)
        self.bidirectional_fn = bidirectional_fn

    def layers(self, ids: torch.Tensor, lengths=None) -> torch.Tensor:
        """All layer representations of ``ids`` ``(B, T)``: ``(L + 1, B, T, 2H)``."""
        embedded = self.embedding(checks.token_batch(ids))  # (B, T, H)
        stacks, _ = self.bidirectional_fn(self.dropout(embedded), lengths, self.forward_stack,
                                          self.backward_stack)  # (B, T, L, 2H)
        token = torch.cat([embedded, embedded], dim=-1).unsqueeze(2)  # (B, T, 1, 2H)
        return torch.cat([token, stacks], dim=2).permute(2, 0, 1, 3)  # (L + 1, B, T, 2H)

    def losses(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean cross-entropies ``(forward, backward)`` of predicting every next and every previous token.

        ``ids`` is a ``(B, T)`` batch; the two losses are scalar tensors ``()``.
        """
        top = self.layers(ids)[-1]  # (B, T, 2H)
        h = self.hidden_size
        forward_logits = self.readout(self.dropout(top[:, :-1, :h]))  # (B, T-1, V) predicts x_{t+1}
        backward_logits = self.readout(self.dropout(top[:, 1:, h:]))  # (B, T-1, V) predicts x_{t-1}
        vocab = forward_logits.shape[-1]
        return (F.cross_entropy(forward_logits.reshape(-1, vocab), ids[:, 1:].reshape(-1)),
                F.cross_entropy(backward_logits.reshape(-1, vocab), ids[:, :-1].reshape(-1)))


def _windows(ids: np.ndarray, seq_len: int, batch_size: int, rng) -> torch.Tensor:
    """``(B, T)`` random windows of the stream."""
    starts = rng.integers(0, len(ids) - seq_len, size=batch_size)
    return torch.as_tensor(np.stack([ids[s:s + seq_len] for s in starts]), dtype=torch.int64)


def train_bilm(model: BiLanguageModel, ids, steps: int, seq_len: int = 32, batch_size: int = 32,
               lr: float = 3e-3, max_norm: float = 1.0, seed: int = 0, progress: bool = True) -> dict:
    """Train both directions of a :class:`BiLanguageModel` on random windows of a stream. Chapter 4.

    Minimizes ``(L_forward + L_backward) / 2`` with Adam, clipping the
    gradient norm to ``max_norm``. Each window starts from zero states in
    both directions.

    Args:
        model: the biLM.
        ids: ``(N,)`` training ids.
        steps, seq_len, batch_size, lr, max_norm: as in
            :func:`~course_lib.recurrent.language_model.train_language_model`.
        seed: seeds the windows and dropout.
        progress: show a tqdm bar.

    Returns:
        a :class:`~course_lib.training.TrainingHistory` with records ``"forward_loss"``,
        ``"backward_loss"`` and ``"grad_norm"``, each ``(steps,)``. The model is trained in place.
    """
    ids = checks.token_ids(ids, model.readout.out_features)
    if len(ids) <= seq_len:
        raise ValueError(f"need more than seq_len={seq_len} ids, got {len(ids)}")
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"forward_loss": [], "backward_loss": [], "grad_norm": []}
    model.train()
    with torch_seed(seed), progress_bar(steps, "training the biLM", progress) as bar:
        for _ in range(checks.positive_int(steps, "steps")):
            forward_loss, backward_loss = model.losses(_windows(ids, seq_len, batch_size, rng))
            history["grad_norm"].append(optimizer_step(model, optimizer, (forward_loss + backward_loss) / 2,
                                                       max_norm))
            history["forward_loss"].append(forward_loss.item())
            history["backward_loss"].append(backward_loss.item())
            bar.update(1)
    return TrainingHistory(history)


@torch.no_grad()
def bilm_perplexities(model: BiLanguageModel, ids, seq_len: int = 32) -> tuple[float, float]:
    """Forward and backward perplexities on consecutive windows of ``ids`` ``(N,)``. Chapter 4."""
    ids = checks.token_ids(ids, model.readout.out_features)
    count = len(ids) // seq_len
    if count == 0:
        raise ValueError(f"need at least seq_len={seq_len} ids")
    windows = torch.as_tensor(ids[:count * seq_len].reshape(count, seq_len), dtype=torch.int64)
    batches = [windows[i:i + 64] for i in range(0, count, 64)]
    with eval_mode(model):
        losses = np.array([[loss.item() for loss in model.losses(batch)] for batch in batches])  # (batches, 2)
    sizes = np.array([len(batch) for batch in batches])
    return tuple(float(np.exp(np.average(losses[:, d], weights=sizes))) for d in (0, 1))


@torch.no_grad()
def contextual_vectors(model: BiLanguageModel, vocab: Vocabulary, sentences: Sequence[Sequence[str]],
                       word: str, unknown: str = "<unk>") -> torch.Tensor:
    """The layer representations of ``word`` in each of ``N`` sentences: ``(N, L + 1, 2H)``. Chapter 4.

    Each sentence (a list of tokens containing ``word``) runs through the biLM
    on its own; tokens outside the vocabulary become ``unknown``.
    """
    if word not in vocab:
        raise KeyError(f"{word!r} is not in the vocabulary")
    vectors = []
    with eval_mode(model):
        for tokens in sentences:
            if word not in tokens:
                raise ValueError(f"{word!r} does not occur in the sentence {' '.join(tokens)!r}")
            ids = torch.tensor([[vocab.index[t] if t in vocab else vocab[unknown] for t in tokens]])  # (1, T)
            vectors.append(model.layers(ids)[:, 0, list(tokens).index(word)])  # (L + 1, 2H)
    return torch.stack(vectors)


def fit_scalar_mix(layers: torch.Tensor, labels, num_classes: int, steps: int = 300, lr: float = 0.05,
                   seed: int = 0, mix_fn: Callable = scalar_mix) -> tuple[ScalarMix, nn.Linear, TrainingHistory]:
    """Learn a task's mix ``s, gamma`` together with a linear classifier on the mixed vectors. Chapter 4.

    Minimizes the cross-entropy of ``softmax(A ELMo_k + a)`` for the labels
    with Adam on the whole set (full batch); the biLM stays frozen.

    Args:
        layers: ``(L + 1, N, 2H)`` representations of ``N`` tokens (any feature size
            works; ``2H`` is that of the biLM's layers).
        labels: ``(N,)`` class ids in ``[0, num_classes)``.
        num_classes: the number of classes.
        steps, lr, seed: optimization settings.
        mix_fn: the mixing function.

    Returns:
        ``(mix, classifier, history)``: ``mix.layer_weights()`` is the learned ``s``; ``history["loss"]``
        ``(steps,)`` is the cross-entropy at each step (a :class:`~course_lib.training.TrainingHistory`).
    """
    if not isinstance(layers, torch.Tensor) or layers.dim() != 3:
        raise ValueError(f"layers must be a (L + 1, N, E) tensor, got {getattr(layers, 'shape', layers)}")
    labels = torch.as_tensor(checks.token_ids(labels, num_classes, "labels"))
    if labels.shape[0] != layers.shape[1]:
        raise ValueError(f"{labels.shape[0]} labels for {layers.shape[1]} tokens")
    with torch_seed(seed):  # the classifier's initial weights
        mix, classifier = ScalarMix(layers.shape[0], mix_fn), nn.Linear(layers.shape[2], num_classes)
    optimizer = torch.optim.Adam(list(mix.parameters()) + list(classifier.parameters()), lr=lr)
    layers = layers.detach().to(mix.weights.dtype)
    losses = []
    for _ in range(checks.positive_int(steps, "steps")):
        loss = F.cross_entropy(classifier(mix(layers)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return mix, classifier, TrainingHistory({"loss": losses})
