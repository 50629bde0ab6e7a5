#include "passes/ScheduleCheck.h"

#include <algorithm>
#include <cmath>

namespace mgc::passes {

double WorkCosts::of(Work work) const {
  switch (work) {
  case Work::Forward:
    return forward;
  case Work::Backward:
    return backward;
  case Work::BackwardInput:
    return inputGrad;
  case Work::BackwardWeight:
    break;
  }
  return weightGrad;
}

namespace {

std::string slotText(const Slot &slot, bool chunks) {
  std::string s(1, workLetter(slot.work));
  s += std::to_string(slot.micro);
  if (chunks)
    s += "." + std::to_string(slot.chunk);
  return s;
}

std::string messageText(const PipeMessage &m) {
  return std::string(m.gradient ? "gradient" : "activation") + " " +
         std::to_string(m.fromStage) + "->" + std::to_string(m.toStage) +
         " of micro-batch " + std::to_string(m.micro);
}

std::string partText(const PipePart &p) {
  return std::string(p.send ? "send " : "receive ") + messageText(p.message) +
         (p.send ? " to device " : " from device ") + std::to_string(p.peer);
}

} // namespace

std::string pipeOpText(const PipeOp &op) {
  switch (op.kind) {
  case PipeOp::Kind::Compute:
    return slotText(op.slot, op.slot.chunk != 0);
  case PipeOp::Kind::Messages: {
    std::string s;
    for (const PipePart &p : op.parts)
      s += (s.empty() ? "" : " + ") + partText(p);
    return s;
  }
  case PipeOp::Kind::Collective:
    break;
  }
  std::string devices;
  for (int64_t d : op.members)
    devices += (devices.empty() ? "" : ", ") + std::to_string(d);
  return op.what + " on devices " + devices;
}

std::vector<PipeProgram> lowerSchedule(const Schedule &s,
                                       const LowerOptions &options) {
  std::vector<PipeProgram> out(s.stages);
  int64_t last = s.virtualStages() - 1;
  for (int64_t d = 0; d < s.stages; ++d) {
    PipeProgram &program = out[d];
    std::vector<PipePart> pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      if (options.groupMessages) {
        program.push_back({PipeOp::Kind::Messages, {}, pending, {}, {}});
      } else {
        for (const PipePart &p : pending)
          program.push_back({PipeOp::Kind::Messages, {}, {p}, {}, {}});
      }
      pending.clear();
    };
    auto message = [&](bool send, bool gradient, int64_t from, int64_t to,
                       int64_t micro) {
      int64_t peer = s.deviceOf(send ? to : from);
      if (peer != d) // consecutive chunks of one device hand over locally
        pending.push_back({send, peer, {gradient, from, to, micro}});
    };
    // The receives a slot needs and the sends it makes.
    auto receives = [&](const Slot &slot) {
      int64_t vs = s.virtualStage(d, slot.chunk), m = slot.micro;
      if (slot.work == Work::Forward && vs > 0)
        message(false, false, vs - 1, vs, m);
      if ((slot.work == Work::Backward || slot.work == Work::BackwardInput) &&
          vs < last)
        message(false, true, vs + 1, vs, m);
    };
    auto sends = [&](const Slot &slot) {
      int64_t vs = s.virtualStage(d, slot.chunk), m = slot.micro;
      if (slot.work == Work::Forward && vs < last)
        message(true, false, vs, vs + 1, m);
      if ((slot.work == Work::Backward || slot.work == Work::BackwardInput) &&
          vs > 0)
        message(true, true, vs, vs - 1, m);
    };
    // Slots run in units (a slot and those that join it); before each unit
    // one group: the sends of the unit before and the receives of this one.
    const std::vector<Slot> &order = s.order[d];
    for (size_t u = 0; u < order.size();) {
      size_t end = u + 1;
      while (end < order.size() && order[end].joinsPrevious)
        ++end;
      for (size_t k = u; k < end; ++k)
        receives(order[k]);
      flush();
      for (size_t k = u; k < end; ++k)
        program.push_back({PipeOp::Kind::Compute, order[k], {}, {}, {}});
      for (size_t k = u; k < end; ++k)
        sends(order[k]);
      u = end;
    }
    flush();
  }
  return out;
}

namespace {

// The simulation of every device's two queues.
class Simulation {
public:
  Simulation(const std::vector<PipeProgram> &programs,
             const std::vector<WorkCosts> &costs)
      : programs_(programs), costs_(costs), devices_(programs.size()) {
    for (size_t d = 0; d < programs.size(); ++d) {
      Device &dev = devices_[d];
      const PipeProgram &p = programs[d];
      dev.done.assign(p.size(), -1);
      dev.arrival.assign(p.size(), -1);
      dev.matched.resize(p.size());
      int lastCompute = -1, lastReceive = -1;
      for (size_t i = 0; i < p.size(); ++i) {
        dev.lastReceive.push_back(lastReceive);
        if (p[i].kind != PipeOp::Kind::Compute && hasReceive(p[i]))
          lastReceive = static_cast<int>(i);
        if (p[i].kind == PipeOp::Kind::Compute) {
          dev.computes.push_back(i);
          lastCompute = static_cast<int>(i);
        } else {
          dev.comms.push_back(i);
          dev.matched[i].assign(p[i].parts.size(), -1);
        }
        // What a device sends (or reduces) is made by its last
        // computation before; a receive alone waits for nothing.
        bool sends = p[i].kind == PipeOp::Kind::Collective ||
                     std::any_of(p[i].parts.begin(), p[i].parts.end(),
                                 [](const PipePart &x) { return x.send; });
        dev.producer.push_back(sends ? lastCompute : -1);
      }
    }
  }

  std::string run() {
    while (true) {
      bool moved = false;
      for (size_t d = 0; d < devices_.size(); ++d)
        moved |= advance(d);
      for (size_t d = 0; d < devices_.size(); ++d) {
        std::string error;
        moved |= match(d, error);
        if (!error.empty())
          return error;
      }
      if (moved)
        continue;
      if (std::all_of(devices_.begin(), devices_.end(), [](const Device &d) {
            return d.nextCompute == d.computes.size() &&
                   d.nextComm == d.comms.size();
          }))
        return "";
      return deadlock();
    }
  }

  void fill(PipeTiming &timing) const {
    double busy = 0;
    timing.start.assign(devices_.size(), {});
    timing.end.assign(devices_.size(), {});
    for (size_t d = 0; d < devices_.size(); ++d)
      for (size_t i : devices_[d].computes) {
        double cost = costs_[d].of(programs_[d][i].slot.work);
        double end = devices_[d].done[i];
        timing.start[d].push_back(end - cost);
        timing.end[d].push_back(end);
        timing.makespan = std::max(timing.makespan, end);
        busy += cost;
      }
    double capacity = timing.makespan * static_cast<double>(devices_.size());
    timing.bubble = capacity > 0 ? 1 - busy / capacity : 0;
  }

private:
  struct Device {
    std::vector<size_t> computes, comms; // op indices, in order
    std::vector<int> producer;           // per op: the compute before it
    std::vector<int> lastReceive; // per op: the receiving comm op before it
    std::vector<double> done, arrival;        // per op, -1 until known
    std::vector<std::vector<double>> matched; // per part: when it met
    size_t nextCompute = 0, nextComm = 0;
    double computeFree = 0, commFree = 0;
  };

  const PipeOp &op(size_t d, size_t i) const { return programs_[d][i]; }
  bool hasReceive(const PipeOp &o) const {
    return o.kind == PipeOp::Kind::Collective ||
           std::any_of(o.parts.begin(), o.parts.end(),
                       [](const PipePart &p) { return !p.send; });
  }
  // The device's communication op now at the head of its queue, posted;
  // -1 if none.
  long current(size_t d) const {
    const Device &dev = devices_[d];
    if (dev.nextComm == dev.comms.size())
      return -1;
    size_t i = dev.comms[dev.nextComm];
    return dev.arrival[i] >= 0 ? static_cast<long>(i) : -1;
  }

  // Runs the computations that can run and posts the next communication
  // once what it sends has been computed.
  bool advance(size_t d) {
    Device &dev = devices_[d];
    bool moved = false;
    while (dev.nextCompute < dev.computes.size()) {
      size_t i = dev.computes[dev.nextCompute];
      double ready = dev.computeFree;
      // It waits for the last communication before it that brings
      // something in (the earlier ones are done before that one).
      if (int w = dev.lastReceive[i]; w >= 0) {
        if (dev.done[w] < 0)
          break;
        ready = std::max(ready, dev.done[w]);
      }
      dev.done[i] = ready + costs_[d].of(op(d, i).slot.work);
      dev.computeFree = dev.done[i];
      ++dev.nextCompute;
      moved = true;
    }
    if (dev.nextComm < dev.comms.size()) {
      size_t i = dev.comms[dev.nextComm];
      int p = dev.producer[i];
      if (dev.arrival[i] < 0 && (p < 0 || dev.done[p] >= 0)) {
        dev.arrival[i] = std::max(dev.commFree, p < 0 ? 0.0 : dev.done[p]);
        moved = true;
      }
    }
    return moved;
  }

  void complete(size_t d, size_t i, double at) {
    Device &dev = devices_[d];
    dev.done[i] = at;
    dev.commFree = at;
    ++dev.nextComm;
  }

  // Meets the parts of device d's posted communication with its peers'.
  bool match(size_t d, std::string &error) {
    long ci = current(d);
    if (ci < 0)
      return false;
    size_t i = static_cast<size_t>(ci);
    Device &dev = devices_[d];
    const PipeOp &mine = op(d, i);
    if (mine.kind == PipeOp::Kind::Collective)
      return matchCollective(d, i, error);
    bool moved = false;
    for (size_t k = 0; k < mine.parts.size(); ++k) {
      if (dev.matched[i][k] >= 0)
        continue;
      const PipePart &part = mine.parts[k];
      size_t b = static_cast<size_t>(part.peer);
      long cj = b < devices_.size() ? current(b) : -1;
      if (cj < 0 || op(b, cj).kind != PipeOp::Kind::Messages)
        continue;
      size_t j = static_cast<size_t>(cj);
      const PipeOp &theirs = op(b, j);
      // The peer's first open part with this device, the other way.
      for (size_t q = 0; q < theirs.parts.size(); ++q) {
        const PipePart &other = theirs.parts[q];
        if (devices_[b].matched[j][q] >= 0 ||
            other.peer != static_cast<int64_t>(d) || other.send == part.send)
          continue;
        if (!(other.message == part.message)) {
          const PipePart &sent = part.send ? part : other;
          const PipePart &received = part.send ? other : part;
          size_t from = part.send ? d : b, to = part.send ? b : d;
          error = "the schedule's messages do not meet: device " +
                  std::to_string(from) + " sends " + messageText(sent.message) +
                  " (" + pipeOpText(op(from, part.send ? i : j)) +
                  ") where device " + std::to_string(to) + " receives " +
                  messageText(received.message) + " (" +
                  pipeOpText(op(to, part.send ? j : i)) + ")";
          return false;
        }
        double at = std::max(dev.arrival[i], devices_[b].arrival[j]);
        dev.matched[i][k] = at;
        devices_[b].matched[j][q] = at;
        moved = true;
        break;
      }
    }
    // The group is done when all its parts have met (a peer whose group
    // this completed finds it so in its own turn).
    if (std::all_of(dev.matched[i].begin(), dev.matched[i].end(),
                    [](double t) { return t >= 0; })) {
      double at = dev.arrival[i];
      for (double t : dev.matched[i])
        at = std::max(at, t);
      complete(d, i, at);
      moved = true;
    }
    return moved;
  }

  bool matchCollective(size_t d, size_t i, std::string &error) {
    const PipeOp &mine = op(d, i);
    double at = 0;
    std::vector<std::pair<size_t, size_t>> heads;
    for (int64_t m : mine.members) {
      size_t b = static_cast<size_t>(m);
      long cj = b < devices_.size() ? current(b) : -1;
      if (cj < 0)
        return false; // not there yet
      const PipeOp &theirs = op(b, cj);
      if (theirs.kind != PipeOp::Kind::Collective)
        return false; // it may still come, after its messages
      if (theirs.members != mine.members || theirs.what != mine.what) {
        error = "the devices of a collective disagree: device " +
                std::to_string(d) + " runs " + pipeOpText(mine) +
                " where device " + std::to_string(b) + " runs " +
                pipeOpText(theirs);
        return false;
      }
      at = std::max(at, devices_[b].arrival[cj]);
      heads.push_back({b, static_cast<size_t>(cj)});
    }
    for (auto [b, j] : heads)
      complete(b, j, at);
    return true;
  }

  std::string deadlock() const {
    for (size_t d = 0; d < devices_.size(); ++d) {
      long ci = current(d);
      if (ci < 0)
        continue;
      const PipeOp &mine = op(d, static_cast<size_t>(ci));
      int64_t peer = -1;
      if (mine.kind == PipeOp::Kind::Collective) {
        for (int64_t m : mine.members)
          if (current(static_cast<size_t>(m)) < 0 ||
              op(static_cast<size_t>(m), current(static_cast<size_t>(m)))
                      .kind != PipeOp::Kind::Collective)
            peer = m;
      } else {
        for (size_t k = 0; k < mine.parts.size(); ++k)
          if (devices_[d].matched[ci][k] < 0) {
            peer = mine.parts[k].peer;
            break;
          }
      }
      if (peer < 0)
        continue;
      const Device &b = devices_[peer];
      std::string theirs =
          b.nextComm == b.comms.size()
              ? "has no communication left"
              : "waits in " + pipeOpText(op(peer, b.comms[b.nextComm]));
      return "the schedule deadlocks: device " + std::to_string(d) +
             " waits in " + pipeOpText(mine) + " for device " +
             std::to_string(peer) + ", which " + theirs;
    }
    return "the schedule deadlocks";
  }

  const std::vector<PipeProgram> &programs_;
  std::vector<WorkCosts> costs_; // per device
  std::vector<Device> devices_;
};

} // namespace

std::string checkPipePrograms(const std::vector<PipeProgram> &programs,
                              const WorkCosts &costs, PipeTiming *timing) {
  return checkPipePrograms(
      programs, std::vector<WorkCosts>(programs.size(), costs), timing);
}

std::string checkPipePrograms(const std::vector<PipeProgram> &programs,
                              const std::vector<WorkCosts> &perDevice,
                              PipeTiming *timing) {
  if (perDevice.size() != programs.size())
    return "the costs are given for " + std::to_string(perDevice.size()) +
           " devices, the programs for " + std::to_string(programs.size());
  for (size_t d = 0; d < programs.size(); ++d)
    for (const PipeOp &op : programs[d])
      for (const PipePart &p : op.parts)
        if (p.peer < 0 || p.peer >= static_cast<int64_t>(programs.size()) ||
            p.peer == static_cast<int64_t>(d))
          return "device " + std::to_string(d) + " has a message with device " +
                 std::to_string(p.peer) + " (" + pipeOpText(op) +
                 "), which is not another device of the pipeline";
  Simulation sim(programs, perDevice);
  std::string error = sim.run();
  if (error.empty() && timing)
    sim.fill(*timing);
  return error;
}

std::string scheduleGrid(const Schedule &schedule,
                         const std::vector<PipeProgram> &programs,
                         const PipeTiming &timing) {
  auto whole = [](double t) { return std::fabs(t - std::round(t)) < 1e-9; };
  size_t width = 0;
  for (size_t d = 0; d < programs.size(); ++d)
    for (const PipeOp &op : programs[d])
      if (op.kind == PipeOp::Kind::Compute)
        width =
            std::max(width, slotText(op.slot, schedule.chunks > 1).size() + 1);
  int64_t units = static_cast<int64_t>(std::llround(timing.makespan));
  std::string out;
  for (size_t d = 0; d < programs.size(); ++d) {
    std::vector<std::string> cells(units, ".");
    size_t k = 0;
    for (const PipeOp &op : programs[d]) {
      if (op.kind != PipeOp::Kind::Compute)
        continue;
      double s = timing.start[d][k], e = timing.end[d][k];
      ++k;
      if (!whole(s) || !whole(e))
        return "(the grid needs costs in whole time units)\n";
      int64_t a = std::llround(s), b = std::llround(e);
      for (int64_t t = a; t < b && t < units; ++t)
        cells[t] = t == a ? slotText(op.slot, schedule.chunks > 1) : "-";
    }
    std::string row = "device " + std::to_string(d) + " |";
    for (const std::string &c : cells)
      row += c + std::string(width - c.size(), ' ');
    while (!row.empty() && row.back() == ' ')
      row.pop_back();
    out += row + "\n";
  }
  return out;
}

} // namespace mgc::passes
