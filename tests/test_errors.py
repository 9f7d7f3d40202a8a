"""Bad inputs get clear errors (type and message naming the argument) before anything runs."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

import bdl

N, D = 10, 3
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D)).astype(np.float32)
Y_REG = RNG.normal(size=(N,)).astype(np.float32)
Y_CLS = RNG.integers(0, 3, size=N)


def _linear(p, x):
    return x @ p["w"]


def _fn_model(likelihood, out=1, **kw):
    """A plain-function network with ``out`` outputs (cheap to compile: no initialiser)."""
    return bdl.Model(_linear, likelihood, params={"w": jnp.zeros((D, out))}, **kw)


@pytest.fixture(scope="module")
def compiled():
    return bdl.compile(_fn_model(bdl.Gaussian(1.0)), (X, Y_REG), batch_size=5)


def test_labels_out_of_range_for_categorical():
    """Categorical labels outside [0, K−1] for K output logits are rejected, naming labels y."""
    y = Y_CLS.copy()
    y[0] = 3
    with pytest.raises(ValueError, match=r"labels y must lie in \[0, 2\].*3 output logits"):
        bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, y))
    y[0] = -1
    with pytest.raises(ValueError, match=r"labels y must lie in \[0, 2\]"):
        bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, y))


def test_non_integer_labels_for_categorical():
    """Categorical with fractional labels is rejected, naming y_train."""
    y = Y_CLS.astype(np.float32)
    y[2] = 0.5
    with pytest.raises(ValueError, match=r"integer class labels.*y_train"):
        bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, y))


def test_integer_valued_float_labels_are_accepted():
    """Float labels with integer values (0., 1., 2.) are converted, for Categorical as Bernoulli."""
    compiled = bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, Y_CLS.astype(np.float64)))
    assert compiled.y_train.dtype == jnp.int32
    np.testing.assert_array_equal(compiled.y_train, Y_CLS)
    assert compiled.num_classes == 3


def test_one_hot_labels_for_categorical():
    """One-hot (n, K) labels are rejected with a hint to use argmax."""
    with pytest.raises(ValueError, match=r"integer class labels y of shape \(n,\).*argmax"):
        bdl.compile(_fn_model(bdl.Categorical(), out=3), (X, np.eye(3)[Y_CLS]))


def test_bernoulli_with_three_outputs():
    """A Bernoulli likelihood on a 3-output network is rejected, naming the output shape."""
    with pytest.raises(ValueError, match=r"Bernoulli likelihood needs one logit.*\(10, 3\)"):
        bdl.compile(_fn_model(bdl.Bernoulli(), out=3), (X, Y_CLS % 2))


def test_bernoulli_labels_not_binary():
    """Bernoulli labels outside {0, 1} are rejected, naming labels y."""
    with pytest.raises(ValueError, match=r"Bernoulli likelihood needs labels y in \{0, 1\}"):
        bdl.compile(_fn_model(bdl.Bernoulli()), (X, Y_CLS))


def test_categorical_with_single_output_vector():
    """Categorical needs (batch, num_classes) outputs; (batch,) is rejected."""
    model = bdl.Model(lambda p, x: x @ p["w"], bdl.Categorical(), params={"w": jnp.zeros(D)})
    with pytest.raises(ValueError, match=r"Categorical likelihood needs network outputs of shape"):
        bdl.compile(model, (X, Y_CLS))


@pytest.mark.parametrize("y_shape", [(N,), (N, 2)])
def test_gaussian_output_width_mismatch(y_shape):
    """A Gaussian with the wrong output width for the targets is rejected, naming both shapes."""
    y = np.zeros(y_shape, np.float32)
    with pytest.raises(
        ValueError,
        match=r"Gaussian likelihood: network output shape \(10, 3\) "
        rf"does not match the target shape \({y_shape[0]},",
    ):
        bdl.compile(_fn_model(bdl.Gaussian(), out=3), (X, y))


def test_network_that_rejects_inputs():
    """A network that cannot be applied to x is reported with the per-example input shape."""
    with pytest.raises(ValueError, match=r"network cannot be applied to inputs of shape \(3,\)"):
        bdl.compile(bdl.Model(_linear, bdl.Gaussian(), params={"w": jnp.zeros((4, 1))}), (X, Y_REG))


def test_nan_in_x():
    """NaN in the inputs is rejected at compile time, naming x_train."""
    x = X.copy()
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"data x_train contains 1 NaN or infinite"):
        bdl.compile(_fn_model(bdl.Gaussian()), (x, Y_REG))


def test_inf_in_y():
    """An infinite target is rejected at compile time, naming y_train."""
    y = Y_REG.copy()
    y[4] = np.inf
    with pytest.raises(ValueError, match=r"data y_train contains 1 NaN or infinite"):
        bdl.compile(_fn_model(bdl.Gaussian()), (X, y))


def test_mismatched_x_and_y_lengths():
    """x and y with different numbers of examples are rejected, naming both."""
    with pytest.raises(ValueError, match=r"x_train has 10 examples but y_train has 9"):
        bdl.compile(_fn_model(bdl.Gaussian()), (X, Y_REG[:9]))


@pytest.mark.parametrize("temperature", [-1.0, -1e-6])
def test_negative_temperature(temperature):
    """A negative temperature is rejected at Model time, naming temperature."""
    with pytest.raises(ValueError, match=r"temperature must be >= 0"):
        _fn_model(bdl.Gaussian(), temperature=temperature)


def test_zero_temperature_is_legal():
    """T = 0 (the optimiser limit) is a legal declaration."""
    assert _fn_model(bdl.Gaussian(), temperature=0.0).temperature == 0.0


def test_negative_temperature_for_potential():
    """bdl.Potential also rejects a negative temperature, and a negative grad_noise."""
    with pytest.raises(ValueError, match=r"temperature must be >= 0"):
        bdl.Potential(lambda t: -jnp.sum(t**2), init=jnp.zeros(2), temperature=-2.0)
    with pytest.raises(ValueError, match=r"grad_noise"):
        bdl.Potential(lambda t: -jnp.sum(t**2), init=jnp.zeros(2), grad_noise=-0.1)


@pytest.mark.parametrize("batch_size", [0, -3, N + 1])
def test_batch_size_out_of_range(batch_size):
    """batch_size must satisfy 1 <= B <= n; the message names batch_size and n."""
    with pytest.raises(ValueError, match=rf"batch_size must satisfy 1 <= batch_size <= n = {N}"):
        bdl.compile(_fn_model(bdl.Gaussian()), (X, Y_REG), batch_size=batch_size)


def test_batch_size_not_an_integer():
    """A float batch size is a TypeError naming batch_size."""
    with pytest.raises(TypeError, match=r"batch_size must be an integer"):
        bdl.compile(_fn_model(bdl.Gaussian()), (X, Y_REG), batch_size=2.5)


def test_unknown_kernel_name_suggests_closest():
    """bdl.kernels.get('sghcm') fails naming the kernel and suggesting 'sghmc'."""
    with pytest.raises(ValueError, match=r"unknown kernel name 'sghcm'\. Did you mean 'sghmc'\?"):
        bdl.kernels.get("sghcm")


@pytest.mark.parametrize("name", ["sgld", "sghmc"])
@pytest.mark.parametrize("step_size", [0.0, -1e-3])
def test_non_positive_step_size(name, step_size):
    """A step size <= 0 is rejected when the kernel is built, naming step_size."""
    with pytest.raises(ValueError, match=r"step_size must be > 0"):
        bdl.kernels.get(name, step_size=step_size)


def test_burn_in_not_smaller_than_num_steps(compiled):
    """bdl.sample with burn_in >= num_steps collects nothing: rejected, naming both."""
    kernel = bdl.kernels.get("sgld", step_size=1e-3)
    for burn_in in (10, 11):
        with pytest.raises(ValueError, match=r"burn_in \(\d+\) must be smaller than num_steps"):
            bdl.sample(compiled, kernel, num_steps=10, burn_in=burn_in)


@pytest.mark.parametrize("thin", [0, -2])
def test_non_positive_thin(compiled, thin):
    """bdl.sample with thin <= 0 is rejected, naming thin."""
    kernel = bdl.kernels.get("sgld", step_size=1e-3)
    with pytest.raises(ValueError, match=r"thin must be >= 1"):
        bdl.sample(compiled, kernel, num_steps=10, thin=thin)


def test_sample_needs_a_compiled_target():
    """bdl.sample on an uncompiled Model is a TypeError pointing at bdl.compile."""
    model = _fn_model(bdl.Gaussian())
    with pytest.raises(TypeError, match=r"compiled target from bdl\.compile"):
        bdl.sample(model, bdl.kernels.get("sgld", step_size=1e-3), num_steps=10)


def test_plain_function_without_params():
    """A plain-function network without params= is rejected at Model time, naming params."""
    with pytest.raises(ValueError, match=r"Model\(params=\.\.\.\) is required"):
        bdl.Model(_linear, bdl.Gaussian())


def test_likelihood_must_be_a_bdl_likelihood():
    """A NumPyro distribution class as likelihood is a TypeError naming likelihood."""
    with pytest.raises(TypeError, match=r"Model\(likelihood=\.\.\.\) must be a bdl likelihood"):
        bdl.Model(_linear, dist.Normal, params={"w": jnp.zeros((D, 1))})


def test_bad_prior_type():
    """A prior that is neither a bdl prior nor a NumPyro distribution is a TypeError."""
    with pytest.raises(TypeError, match=r"prior must be a bdl prior"):
        _fn_model(bdl.Gaussian(), prior=1.0)


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: bdl.Normal(0.0), r"Normal\(scale=\.\.\.\) must be > 0"),
        (lambda: bdl.Laplace(-1.0), r"Laplace\(scale=\.\.\.\) must be > 0"),
        (lambda: bdl.HeNormal(gain=0.0), r"HeNormal\(gain=\.\.\., bias_scale=\.\.\.\)"),
        (lambda: bdl.Gaussian(scale=0.0), r"Gaussian\(scale=\.\.\.\) must be > 0"),
        (lambda: bdl.StudentT(df=-1.0), r"StudentT\(df=\.\.\.\) must be > 0"),
    ],
    ids=["normal", "laplace", "he_normal", "gaussian", "student_t"],
)
def test_non_positive_scales(factory, match):
    """Priors and likelihoods reject non-positive scales, naming the argument."""
    with pytest.raises(ValueError, match=match):
        factory()


def test_model_needs_data():
    """bdl.compile(model) without data is rejected, naming data."""
    with pytest.raises(ValueError, match=r"compile\(model, data=\.\.\.\)"):
        bdl.compile(_fn_model(bdl.Gaussian()))


def test_unsupported_network_type():
    """A network that is not a module or callable is a TypeError naming network."""
    with pytest.raises(TypeError, match=r"Model\(network=\.\.\.\) must be"):
        bdl.Model(42, bdl.Gaussian())


def test_linen_network_whose_initialisation_rejects_inputs():
    """A linen module that cannot be initialised on x raises ValueError naming the input shape."""

    class Bad(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(1)(x.reshape(x.shape[0], 2, -1))  # 3 features do not split in 2

    with pytest.raises(ValueError, match=r"cannot be initialised on inputs of shape \(3,\)"):
        bdl.compile(bdl.Model(Bad(), bdl.Gaussian()), (X, Y_REG))


def test_init_position_with_wrong_structure(compiled):
    """An explicit init position whose structure differs from the model's is rejected."""
    with pytest.raises(ValueError, match=r"init position does not have the structure"):
        compiled.init_positions(jax.random.key(0), 2, {"net": {"v": jnp.zeros((D, 1))}})


def test_unknown_init_string(compiled):
    """An unknown init name lists the accepted ones."""
    with pytest.raises(ValueError, match=r"init must be one of \('auto', 'network', 'perturbed'"):
        compiled.init_positions(jax.random.key(0), 2, "bogus")
