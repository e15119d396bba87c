"""Emulator fidelity, measured: one scripted sequence of API calls run against the emulator and
a real kube-apiserver, compared step by step.

* ``compare``: the pure part (normalise, diff, judge against the allow-list);
* ``client``: plain HTTP to one server, and playing the steps on two;
* ``steps/``: the steps, each making a few calls and returning what it saw (a *record*);
* ``sequence``: their order, the cleanup, ``run``;
* ``known``: the differences we accept, each with its reason;
* ``webhook``: an AdmissionReview server that records what each server sends.
"""
