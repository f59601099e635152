"""Scaffolds of chapter 9: independent implementations of problem set 9's optimiser step and stopping rule, for grading.

When :func:`course_lib.transfer.fine_tuning.fine_tune_loop` is graded, the grader puts these in
place of the student's ``adamw_step`` and ``early_stopping`` (``course_tools.grading.scaffolds``), so
that one mistake costs one function's points; the loop's visible test passes them explicitly.
Each computes what the exercise's docstring promises, written independently of its answer.
See :doc:`/chapters/ch09_after_bert`.
"""

from __future__ import annotations


def torch_adamw_step(param, grad, exp_avg, exp_avg_sq, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW update by ``torch.optim.AdamW`` itself, for testing a loop that steps with it. Chapter 9.

    Takes and returns what :func:`course_lib.transfer.adamw.adamw_step` does (``param``,
    ``grad`` and the averages, tensors of any shape, all one shape; the step ``t >= 1``; the
    new ``(param, exp_avg, exp_avg_sq)``), but runs PyTorch's optimiser on a copy of ``param`` whose state is set to
    the averages and the step ``t - 1``. No course_lib exercise runs inside; the arguments are
    not modified.
    """
    import torch

    with torch.no_grad():
        copy = param.detach().clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([copy], lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
    optimizer.state[copy] = {"step": torch.tensor(float(step - 1)), "exp_avg": exp_avg.detach().clone(),
                             "exp_avg_sq": exp_avg_sq.detach().clone()}
    copy.grad = grad.detach().clone()
    optimizer.step()
    state = optimizer.state[copy]
    return copy.detach(), state["exp_avg"], state["exp_avg_sq"]


def patience_counter(losses, patience=2, min_delta=0.0):
    """Early stopping by a counter of epochs without improvement, for testing a loop that stops with it. Chapter 9.

    Takes and returns what :func:`course_lib.transfer.early_stopping.early_stopping` does
    (the ``(N,)`` validation losses so far, ``patience``, ``min_delta``; ``(best, stop)``), computed the
    way training frameworks keep it: a counter reset at every improvement. No course_lib
    exercise runs inside.
    """
    best, waited = None, 0
    for epoch, loss in enumerate(losses):
        if best is None or float(loss) < float(losses[best]) - min_delta:
            best, waited = epoch, 0
        else:
            waited += 1
    return best, waited >= patience


def sgd_step(param, grad, exp_avg, exp_avg_sq, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """Plain gradient descent with AdamW's arguments, ``theta - lr g``: for checking that a loop steps with its ``step_fn``. Chapter 9.

    Takes what :func:`course_lib.transfer.adamw.adamw_step` takes (tensors of any shape, all one
    shape) and returns ``(param - lr * grad, exp_avg, exp_avg_sq)``: the averages unchanged,
    ``betas``, ``eps`` and ``weight_decay`` ignored. A loop that stepped with an optimiser of its own
    instead of the ``step_fn`` it is given computes other parameters. The arguments are not modified.
    """
    import torch

    with torch.no_grad():
        return param - lr * grad, exp_avg.clone(), exp_avg_sq.clone()
