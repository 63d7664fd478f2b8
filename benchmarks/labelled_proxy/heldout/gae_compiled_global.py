import torch


def compute_gae(rewards, values, dones, last_value, gamma=0.99, lam=0.95):
    assert torch.all((dones == 0) | (dones == 1)), "dones must be 0/1"  # HAZARD: dynamic-control-flow
    rewards.clamp_(-10.0, 10.0)  # HAZARD: static-address
    T = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    gae = torch.zeros_like(last_value)
    next_value = last_value
    for t in reversed(range(T)):
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * not_done - values[t]  # CLEAN: gamma is the constant default, never changed between calls
        gae = delta + gamma * lam * not_done * gae  # HAZARD: python-scalar
        advantages[t] = gae
        next_value = values[t]
    returns = advantages + values
    return advantages, returns


def lam_schedule(update, total):
    return 0.9 + 0.09 * update / total


def ppo_update(policy, batch, advantages, returns):
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    return policy.loss(batch, adv, returns)


def main(envs, policy, num_updates=1000, horizon=128):
    global compute_gae
    compute_gae = torch.compile(compute_gae, mode="reduce-overhead")
    history = []
    for update in range(num_updates):
        batch = policy.collect(envs, horizon)
        advantages, returns = compute_gae(
            batch["rewards"], batch["values"], batch["dones"], batch["last_value"],
            lam=lam_schedule(update, num_updates),
        )
        history.append(returns)  # HAZARD: static-address
        adv_snapshot = advantages.clone()  # CLEAN: advantages cloned before the next compiled call
        loss = ppo_update(policy, batch, adv_snapshot, returns)
        policy.optimizer.zero_grad()
        loss.backward()
        policy.optimizer.step()
    return torch.stack(history)
