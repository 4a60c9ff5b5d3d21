//! Reading the tree: the `.queues` lists walked from `root`, each queue's settings
//! read and checked as YARN's queue constructors check them, then the capacities
//! worked out per partition.

use super::*;

/// A queue found while walking `.queues` lists, before its settings are read.
pub(super) struct Listed {
    path: String,
    parent: Option<usize>,
    /// The `.queues` property that lists it.
    listed_at: Option<Location>,
}

pub(super) struct Builder<'a> {
    pub(super) conf: &'a Configuration,
    pub(super) errors: Vec<ConfigError>,
    pub(super) warnings: Vec<ConfigWarning>,
}

impl Builder<'_> {
    pub(super) fn build(&mut self) -> QueueTree {
        let maximum_applications = self
            .global("maximum-applications", |s| {
                parse_i64(s).and_then(|v| {
                    u32::try_from(v).map_err(|_| "expected a non-negative integer".into())
                })
            })
            .unwrap_or(DEFAULT_MAXIMUM_APPLICATIONS);
        let maximum_am_resource_percent = self
            .global("maximum-am-resource-percent", |s| parse_f64_in(s, 0.0, 1.0))
            .unwrap_or(DEFAULT_MAXIMUM_AM_RESOURCE_PERCENT);
        let resource_calculator = self
            .global("resource-calculator", |s| Ok(s.trim().to_string()))
            .unwrap_or_else(|| DEFAULT_RESOURCE_CALCULATOR.to_string());
        if resource_calculator != DOMINANT_RESOURCE_CALCULATOR {
            self.warnings.push(ConfigWarning::Note {
                key: format!("{PREFIX}resource-calculator"),
                location: self.conf.location(&format!("{PREFIX}resource-calculator")).cloned(),
                message: format!(
                    "YARN uses {resource_calculator}, which compares queues by memory only; \
                     Preemptor compares by dominant share, so set DominantResourceCalculator for the two to agree"
                ),
            });
        }
        let global_queue_max_apps = self
            .global("global-queue-max-application", |s| {
                parse_i64(s).map(|v| u32::try_from(v).ok().filter(|&v| v > 0))
            })
            .flatten();
        let defaults = Defaults {
            user_limit_factor: self
                .global("user-limit-factor", parse_user_limit_factor)
                .unwrap_or(1.0),
            minimum_user_limit_percent: self
                .global("minimum-user-limit-percent", parse_user_limit_percent)
                .unwrap_or(100.0),
            maximum_am_resource_percent,
        };

        let listed = self.list_queues();
        let mut queues: Vec<QueueConfig> = Vec::with_capacity(listed.len());
        for (i, l) in listed.iter().enumerate() {
            let q = self.read_queue(l, &queues, &defaults);
            if let Some(p) = l.parent {
                queues[p].children.push(i);
            }
            queues.push(q);
        }
        fill_label_partitions(&mut queues);
        // Leaves are only known once every queue is listed.
        for i in 0..queues.len() {
            self.check_ordering_policy(&mut queues, i);
        }
        let by_path: HashMap<String, usize> = queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.path.clone(), i))
            .collect();
        compute_fractions(&mut queues);
        for p in 0..queues.len() {
            if queues[p].is_leaf() {
                continue;
            }
            self.check_children(&queues, p, None);
            let labels: BTreeSet<String> = queues[p]
                .children
                .iter()
                .flat_map(|&c| queues[c].labels.keys().cloned())
                .filter(|l| queues[p].accessible_node_labels.can_access(l))
                .collect();
            for l in &labels {
                self.check_children(&queues, p, Some(l));
            }
        }
        for i in 0..queues.len() {
            self.check_queue(&queues, i);
        }
        // Applications only run in leaves; YARN ignores the limit on parents.
        for q in &mut queues {
            q.maximum_applications = if q.children.is_empty() {
                q.maximum_applications
                    .or(global_queue_max_apps)
                    .or_else(|| {
                        q.capacities
                            .absolute_capacity
                            .map(|f| round6(f64::from(maximum_applications) * f).floor() as u32)
                    })
            } else {
                None
            };
        }
        self.check_stray_keys(&by_path);
        QueueTree {
            queues,
            maximum_applications,
            maximum_am_resource_percent,
            resource_calculator,
            warnings: Vec::new(),
            by_path,
        }
    }

    /// An expanded value and where it was set. `Err(())` when it cannot be expanded
    /// (the error is collected), so callers do not also report it as missing.
    fn value(&mut self, key: &str) -> Result<Option<(String, Option<Location>)>, ()> {
        match self.conf.get(key) {
            Ok(v) => Ok(v.map(|v| (v, self.conf.location(key).cloned()))),
            Err(e) => {
                self.errors.push(e);
                Err(())
            }
        }
    }

    fn global<T>(
        &mut self,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let key = format!("{PREFIX}{suffix}");
        let (v, location) = self.value(&key).ok().flatten()?;
        match parse(&v) {
            Ok(t) => Some(t),
            Err(expected) => {
                self.errors.push(ConfigError::InvalidValue {
                    key,
                    value: v,
                    expected,
                    location,
                });
                None
            }
        }
    }

    fn queue_error(&mut self, queue: &str, location: Option<Location>, problem: QueueProblem) {
        self.errors.push(ConfigError::Queue {
            queue: queue.to_string(),
            location,
            problem,
        });
    }

    /// Reads `<queue>.<suffix>`; `Err(())` when set but invalid (already reported).
    fn queue_value<T>(
        &mut self,
        queue: &str,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<(T, Option<Location>)>, ()> {
        let key = format!("{PREFIX}{queue}.{suffix}");
        let Some((v, location)) = self.value(&key)? else {
            return Ok(None);
        };
        match parse(&v) {
            Ok(t) => Ok(Some((t, location))),
            Err(expected) => {
                self.queue_error(
                    queue,
                    location,
                    QueueProblem::InvalidValue {
                        key,
                        value: v,
                        expected,
                    },
                );
                Err(())
            }
        }
    }

    fn queue_opt<T>(
        &mut self,
        queue: &str,
        suffix: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        self.queue_value(queue, suffix, parse)
            .ok()
            .flatten()
            .map(|(t, _)| t)
    }

    /// Walks `root.queues` and the nested `.queues` lists depth-first, so queues come
    /// out in pre-order. Iterative: a hostile file cannot overflow the stack.
    fn list_queues(&mut self) -> Vec<Listed> {
        let mut out = Vec::new();
        let mut stack = vec![Listed {
            path: ROOT.to_string(),
            parent: None,
            listed_at: None,
        }];
        while let Some(l) = stack.pop() {
            let index = out.len();
            let key = format!("{PREFIX}{}.queues", l.path);
            let (children, at, readable) = match self.value(&key) {
                Ok(Some((v, at))) => (parse_list(&v), at, true),
                Ok(None) => (Vec::new(), None, true),
                Err(()) => (Vec::new(), None, false),
            };
            if readable && children.is_empty() && l.parent.is_none() {
                self.queue_error(ROOT, at.clone(), QueueProblem::NoChildQueues);
            }
            let mut seen = BTreeSet::new();
            let mut pending = Vec::new();
            for name in children {
                if let Some(reason) = invalid_queue_name(&name) {
                    self.queue_error(
                        &l.path,
                        at.clone(),
                        QueueProblem::InvalidName { name, reason },
                    );
                    continue;
                }
                if !seen.insert(name.clone()) {
                    self.queue_error(&l.path, at.clone(), QueueProblem::DuplicateChild { name });
                    continue;
                }
                pending.push(Listed {
                    path: format!("{}.{name}", l.path),
                    parent: Some(index),
                    listed_at: at.clone(),
                });
            }
            out.push(l);
            stack.extend(pending.into_iter().rev());
        }
        out
    }

    fn read_queue(&mut self, l: &Listed, done: &[QueueConfig], defaults: &Defaults) -> QueueConfig {
        let path = l.path.as_str();
        let parent = l.parent.map(|p| &done[p]);
        let capacities = self.read_capacities(path, None, l);
        let accessible_node_labels = self.read_accessible_labels(path, parent);
        let labels = self.read_label_capacities(path, &accessible_node_labels, l);
        let default_node_label_expression =
            self.read_default_label(path, parent, &accessible_node_labels);

        let configured_state = self.queue_opt(path, "state", parse_state);
        let parent_state = parent.map_or(QueueState::Running, |p| p.state);
        if let (Some(QueueState::Running), QueueState::Stopped, Some(p)) =
            (configured_state, parent_state, parent)
        {
            let location = self
                .conf
                .location(&format!("{PREFIX}{path}.state"))
                .cloned();
            self.queue_error(
                path,
                location,
                QueueProblem::RunningUnderStopped {
                    parent: p.path.clone(),
                },
            );
        }
        let preemption_disabled = self
            .queue_opt(path, "disable_preemption", parse_bool)
            .unwrap_or_else(|| parent.is_some_and(|p| p.preemption_disabled));
        let own_class = self.queue_opt(path, "preemptor.job-class", |s| s.parse::<JobClass>());
        let own_policy = self.queue_opt(path, "preemptor.policy", |s| s.parse::<PolicyKind>());
        let maximum_applications = self
            .queue_opt(path, "maximum-applications", |s| match parse_i64(s)? {
                -1 => Ok(None),
                v => u32::try_from(v)
                    .map(Some)
                    .map_err(|_| "expected -1 (unset) or a non-negative integer".into()),
            })
            .flatten();
        let (name, depth) = match parent {
            Some(p) => (
                path.rsplit('.').next().unwrap_or(path).to_string(),
                p.depth + 1,
            ),
            None => (ROOT.to_string(), 0),
        };
        let default_acl = if parent.is_none() { "*" } else { " " };
        QueueConfig {
            path: path.to_string(),
            name,
            parent: l.parent,
            children: Vec::new(),
            depth,
            capacities,
            labels,
            accessible_node_labels,
            default_node_label_expression,
            user_limit_factor: self
                .queue_opt(path, "user-limit-factor", parse_user_limit_factor)
                .unwrap_or(defaults.user_limit_factor),
            minimum_user_limit_percent: self
                .queue_opt(path, "minimum-user-limit-percent", parse_user_limit_percent)
                .unwrap_or(defaults.minimum_user_limit_percent),
            state: configured_state.unwrap_or(parent_state),
            preemption_disabled,
            // Checked once leaves are known.
            ordering_policy: OrderingPolicy::Fifo,
            maximum_applications,
            maximum_am_resource_percent: self
                .queue_opt(path, "maximum-am-resource-percent", |s| {
                    parse_f64_in(s, 0.0, 1.0)
                })
                .unwrap_or(defaults.maximum_am_resource_percent),
            acl_submit_applications: self
                .queue_opt(path, "acl_submit_applications", |s| Ok(s.to_string()))
                .unwrap_or_else(|| default_acl.to_string()),
            acl_administer_queue: self
                .queue_opt(path, "acl_administer_queue", |s| Ok(s.to_string()))
                .unwrap_or_else(|| default_acl.to_string()),
            allow_zero_capacity_sum: self
                .queue_opt(path, "allow-zero-capacity-sum", parse_bool)
                .unwrap_or(false),
            job_class: own_class.or_else(|| parent.and_then(|p| p.job_class)),
            policy: own_policy.or_else(|| parent.and_then(|p| p.policy)),
            policy_is_own: own_policy.is_some(),
        }
    }

    fn check_ordering_policy(&mut self, queues: &mut [QueueConfig], i: usize) {
        let leaf = queues[i].is_leaf();
        let path = queues[i].path.clone();
        queues[i].ordering_policy = self
            .queue_opt(&path, "ordering-policy", |s| OrderingPolicy::parse(s, leaf))
            .unwrap_or(if leaf {
                OrderingPolicy::Fifo
            } else {
                OrderingPolicy::Utilization
            });
    }

    /// `capacity` and `maximum-capacity` of the default partition (`label` None) or of
    /// `accessible-node-labels.<label>`.
    fn read_capacities(&mut self, path: &str, label: Option<&str>, l: &Listed) -> Capacities {
        let is_root = l.parent.is_none();
        let prefix = match label {
            None => String::new(),
            Some(label) => format!("accessible-node-labels.{label}."),
        };
        let cap_suffix = format!("{prefix}capacity");
        let max_suffix = format!("{prefix}maximum-capacity");
        // Labels default to 0 (root: 100); the default partition must be configured.
        let mut caps = Capacities::unset(if is_root { 100.0 } else { 0.0 });
        match self.queue_value(path, &cap_suffix, |s| parse_capacity(s, true)) {
            Ok(Some(((value, ignored), location))) => {
                self.note_ignored_resources(path, &cap_suffix, &ignored, &location);
                if is_root && value != CapacityValue::Percent(100.0) {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::RootCapacity {
                            value: value.to_string(),
                        },
                    );
                } else {
                    caps.capacity = value;
                }
                caps.capacity_location = location;
            }
            Ok(None) if label.is_none() && !is_root => {
                caps.invalid = true;
                let parent = path.rsplit_once('.').map_or(ROOT, |(p, _)| p).to_string();
                self.queue_error(
                    path,
                    l.listed_at.clone(),
                    QueueProblem::NotConfigured { parent },
                );
            }
            Ok(None) => {}
            Err(()) => caps.invalid = true,
        }
        match self.queue_value(path, &max_suffix, |s| match s.trim() {
            "-1" => Ok((CapacityValue::Percent(100.0), vec![])),
            _ => parse_capacity(s, false),
        }) {
            Ok(Some(((value, ignored), location))) => {
                self.note_ignored_resources(path, &max_suffix, &ignored, &location);
                caps.maximum_capacity = value;
                caps.maximum_capacity_location = location;
            }
            Ok(None) => {}
            Err(()) => caps.invalid = true,
        }
        caps
    }

    fn note_ignored_resources(
        &mut self,
        path: &str,
        suffix: &str,
        ignored: &[String],
        location: &Option<Location>,
    ) {
        for name in ignored {
            self.warnings.push(ConfigWarning::Note {
                key: format!("{PREFIX}{path}.{suffix}"),
                location: location.clone(),
                message: format!(
                    "resource {name:?} is ignored: Preemptor models memory and vcores only"
                ),
            });
        }
    }

    /// The RM refuses to start when a queue's default label is one it cannot access.
    fn read_default_label(
        &mut self,
        path: &str,
        parent: Option<&QueueConfig>,
        accessible: &NodeLabels,
    ) -> Option<String> {
        let key = format!("{PREFIX}{path}.default-node-label-expression");
        let Ok(Some((v, location))) = self.value(&key) else {
            return parent.and_then(|p| p.default_node_label_expression.clone());
        };
        let label = v.trim();
        if label.is_empty() {
            return None;
        }
        if !valid_label(label) || !accessible.can_access(label) {
            self.queue_error(
                path,
                location,
                QueueProblem::InvalidValue {
                    key,
                    value: v.clone(),
                    expected: format!(
                        "a node label this queue can access (accessible-node-labels is {accessible})"
                    ),
                },
            );
            return None;
        }
        Some(label.to_string())
    }

    fn read_accessible_labels(&mut self, path: &str, parent: Option<&QueueConfig>) -> NodeLabels {
        let key = format!("{PREFIX}{path}.accessible-node-labels");
        let Some(parent) = parent else {
            if self.conf.get_raw(&key).is_some() {
                self.warnings.push(ConfigWarning::Note {
                    key: key.clone(),
                    location: self.conf.location(&key).cloned(),
                    message: "ignored: root can always access every label (*), as in YARN".into(),
                });
            }
            return NodeLabels::Any;
        };
        let Ok(Some((v, location))) = self.value(&key) else {
            return parent.accessible_node_labels.clone();
        };
        let list = parse_list(&v);
        let labels = if list.iter().any(|l| l == "*") {
            NodeLabels::Any
        } else {
            let mut set = BTreeSet::new();
            for label in list {
                if valid_label(&label) {
                    set.insert(label);
                } else {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::InvalidValue {
                            key: key.clone(),
                            value: v.clone(),
                            expected: format!(
                                "{label:?} is not a node label name (letters, digits, - and _, starting with a letter or digit)"
                            ),
                        },
                    );
                }
            }
            NodeLabels::Only(set)
        };
        match (&parent.accessible_node_labels, &labels) {
            (NodeLabels::Any, _) => {}
            (NodeLabels::Only(p), NodeLabels::Any) => self.queue_error(
                path,
                location,
                QueueProblem::AnyLabelUnderRestrictedParent {
                    parent: parent.path.clone(),
                    parent_labels: p.iter().cloned().collect::<Vec<_>>().join(","),
                },
            ),
            (NodeLabels::Only(p), NodeLabels::Only(c)) => {
                for label in c.difference(p) {
                    self.queue_error(
                        path,
                        location.clone(),
                        QueueProblem::LabelNotInParent {
                            label: label.clone(),
                            parent: parent.path.clone(),
                        },
                    );
                }
            }
        }
        labels
    }

    /// Capacities for every label the queue names explicitly, plus those it sets keys
    /// for; keys for labels it cannot access are ignored, as YARN does, with a warning.
    fn read_label_capacities(
        &mut self,
        path: &str,
        access: &NodeLabels,
        l: &Listed,
    ) -> BTreeMap<String, Capacities> {
        let key_prefix = format!("{PREFIX}{path}.accessible-node-labels.");
        let mut mentioned: BTreeSet<String> = self
            .conf
            .keys_with_prefix(&key_prefix)
            .filter_map(|k| {
                let rest = &k[key_prefix.len()..];
                let (label, attr) = rest.split_once('.')?;
                matches!(attr, "capacity" | "maximum-capacity").then(|| label.to_string())
            })
            .collect();
        if let NodeLabels::Only(set) = access {
            for label in mentioned.iter().filter(|m| !set.contains(*m)) {
                let key = format!("{key_prefix}{label}.capacity");
                self.warnings.push(ConfigWarning::Note {
                    location: self.conf.location(&key).cloned(),
                    key,
                    message: format!("ignored: {path} cannot access node label {label:?} (see its accessible-node-labels)"),
                });
            }
            mentioned.retain(|m| set.contains(m));
            mentioned.extend(set.iter().cloned());
        }
        mentioned
            .into_iter()
            .map(|label| {
                let caps = self.read_capacities(path, Some(&label), l);
                (label, caps)
            })
            .collect()
    }

    /// The checks YARN makes over a parent's children in one partition (C09 to C14 of
    /// QueueCapacityChecks).
    fn check_children(&mut self, queues: &[QueueConfig], p: usize, label: Option<&str>) {
        let parent = &queues[p];
        let Some(parent_caps) = parent.partition(label) else {
            return;
        };
        let children: Vec<(&QueueConfig, Option<&Capacities>)> = parent
            .children
            .iter()
            .map(|&c| (&queues[c], queues[c].partition(label)))
            .collect();
        // A missing or unreadable capacity was reported already; sums over it would
        // only repeat that, but the forms of the other siblings can still clash.
        let incomplete = parent_caps.invalid
            || children
                .iter()
                .any(|(_, caps)| caps.is_some_and(|c| c.invalid));
        let owned_label = label.map(str::to_string);
        let location = parent.children.iter().find_map(|&c| {
            queues[c]
                .partition(label)
                .and_then(|c| c.capacity_location.clone())
        });
        let mut forms: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (q, caps) in &children {
            let form = match caps.map(|c| c.capacity) {
                Some(CapacityValue::Percent(x)) if x > 0.0 => "percentage",
                Some(CapacityValue::Weight(_)) => "weight",
                Some(CapacityValue::Absolute(_)) => "absolute",
                _ => continue,
            };
            forms.entry(form).or_default().push(q.name.as_str());
        }
        if forms.len() > 1 {
            let details = forms
                .iter()
                .map(|(form, names)| format!("{form}: {}", names.join(", ")))
                .collect::<Vec<_>>()
                .join("; ");
            self.queue_error(
                &parent.path,
                location,
                QueueProblem::MixedCapacityForms {
                    label: owned_label,
                    details,
                },
            );
            return;
        }
        let children_form = forms.keys().next().copied().unwrap_or("percentage");
        let parent_form = if parent.is_root() {
            "percentage"
        } else {
            match parent_caps.capacity {
                CapacityValue::Percent(_) => "percentage",
                CapacityValue::Weight(_) => "weight",
                CapacityValue::Absolute(_) => "absolute",
            }
        };
        if incomplete {
            return;
        }
        if !parent.is_root()
            && (children_form == "absolute" || parent_form == "absolute")
            && children_form != parent_form
        {
            self.queue_error(
                &parent.path,
                location,
                QueueProblem::AbsoluteParentMismatch {
                    parent: parent_form,
                    children: children_form,
                },
            );
            return;
        }
        match (children_form, parent_caps.capacity) {
            ("absolute", CapacityValue::Absolute(parent_min)) => {
                let sum = children
                    .iter()
                    .filter_map(|(_, c)| c.and_then(|c| c.capacity.absolute()))
                    .fold(Resource::ZERO, |acc, r| acc + r);
                if !sum.fits_in(&parent_min) {
                    self.queue_error(
                        &parent.path,
                        parent_caps.capacity_location.clone(),
                        QueueProblem::ChildrenExceedParent {
                            label: owned_label,
                            parent: parent_min,
                            children: sum,
                        },
                    );
                }
            }
            ("percentage", _) => {
                let sum: f64 = children
                    .iter()
                    .filter_map(|(_, c)| match c.map(|c| c.capacity) {
                        Some(CapacityValue::Percent(x)) => Some(x / 100.0),
                        _ => None,
                    })
                    .sum();
                let parent_fraction = match parent_caps.capacity {
                    CapacityValue::Percent(x) if !parent.is_root() => Some(x / 100.0),
                    _ if parent.is_root() => Some(1.0),
                    _ => None,
                };
                let allow_zero = parent.allow_zero_capacity_sum;
                let problem = if (1.0 - sum).abs() > CAPACITY_SUM_PRECISION {
                    if sum.abs() > CAPACITY_SUM_PRECISION {
                        Some(QueueProblem::CapacitySum {
                            label: owned_label,
                            sum: round_percent(sum),
                            tolerance: CAPACITY_SUM_PRECISION * 100.0,
                        })
                    } else if parent_fraction.is_some_and(|f| f.abs() > CAPACITY_SUM_PRECISION)
                        && !allow_zero
                    {
                        Some(QueueProblem::ZeroCapacitySum { label: owned_label })
                    } else {
                        None
                    }
                } else if parent_fraction.is_some_and(|f| f <= 0.0) && !allow_zero {
                    Some(QueueProblem::PositiveSumUnderZeroCapacity {
                        label: owned_label,
                        sum: round_percent(sum),
                    })
                } else {
                    None
                };
                if let Some(problem) = problem {
                    self.queue_error(&parent.path, location, problem);
                }
            }
            _ => {}
        }
    }

    /// Checks of one queue against itself and its parent, in every partition.
    fn check_queue(&mut self, queues: &[QueueConfig], i: usize) {
        let q = &queues[i];
        let mut partitions: Vec<Option<&str>> = vec![None];
        partitions.extend(q.labels.keys().map(|l| Some(l.as_str())));
        for label in partitions {
            let Some(caps) = q.partition(label) else {
                continue;
            };
            if caps.invalid {
                continue;
            }
            let owned_label = label.map(str::to_string);
            let location = caps
                .maximum_capacity_location
                .clone()
                .or_else(|| caps.capacity_location.clone());
            if let (Some(c), Some(m)) = (caps.absolute_capacity, caps.absolute_maximum_capacity)
                && m < c - EPSILON
            {
                self.queue_error(
                    &q.path,
                    location.clone(),
                    QueueProblem::MaxBelowCapacity {
                        label: owned_label.clone(),
                        capacity: c,
                        maximum: m,
                    },
                );
            }
            let parent_max = q
                .parent
                .and_then(|p| queues[p].partition(label))
                .and_then(|p| p.maximum_capacity.absolute());
            let own_max = caps.maximum_capacity.absolute();
            if let (Some(m), Some(pm)) = (own_max, parent_max)
                && !m.fits_in(&pm)
            {
                self.queue_error(
                    &q.path,
                    location.clone(),
                    QueueProblem::MaxAboveParentMax {
                        label: owned_label.clone(),
                        maximum: m,
                        parent: pm,
                    },
                );
            }
            if let (Some(min), Some(max)) = (caps.capacity.absolute(), own_max.or(parent_max))
                && !min.fits_in(&max)
            {
                self.queue_error(
                    &q.path,
                    caps.capacity_location.clone(),
                    QueueProblem::MinAboveMax {
                        label: owned_label,
                        minimum: min,
                        maximum: max,
                    },
                );
            }
        }
    }

    /// Warns about keys for queues that are not in the tree and about unknown
    /// Preemptor per-queue keys (with a suggestion).
    fn check_stray_keys(&mut self, by_path: &HashMap<String, usize>) {
        let conf = self.conf;
        let root_prefix = format!("{PREFIX}{ROOT}.");
        for key in conf.keys_with_prefix(&root_prefix) {
            let rest = &key[PREFIX.len()..];
            let mut path_end = ROOT.len();
            for (i, _) in rest.match_indices('.').skip(1) {
                if by_path.contains_key(&rest[..i]) {
                    path_end = i;
                } else {
                    break;
                }
            }
            let (path, suffix) = (&rest[..path_end], &rest[path_end + 1..]);
            let location = conf.location(key).cloned();
            if let Some(attr) = suffix.strip_prefix("preemptor.") {
                if !PREEMPTOR_QUEUE_KEYS.contains(&suffix)
                    && let Some(location) = location
                {
                    let suggestion =
                        did_you_mean(attr, PREEMPTOR_QUEUE_KEYS.map(|k| &k["preemptor.".len()..]))
                            .map(|s| format!("{PREFIX}{path}.preemptor.{s}"));
                    self.warnings.push(ConfigWarning::UnknownKey {
                        key: key.to_string(),
                        location,
                        suggestion,
                    });
                }
                continue;
            }
            if let Some((child, attr)) = suffix.split_once('.') {
                let child_path = format!("{path}.{child}");
                if !by_path.contains_key(&child_path)
                    && (QUEUE_KEYS.contains(&attr) || attr.starts_with("preemptor."))
                {
                    self.warnings.push(ConfigWarning::Note {
                        key: key.to_string(),
                        location,
                        message: format!(
                            "ignored: queue {child_path} is not listed in {path}.queues"
                        ),
                    });
                }
            }
        }
    }
}

/// Absolute capacity and absolute maximum capacity as fractions of the partition,
/// down the tree: percentages multiply, weights are normalised among siblings.
pub(super) fn compute_fractions(queues: &mut [QueueConfig]) {
    let root = &mut queues[0];
    root.capacities.absolute_capacity = Some(1.0);
    root.capacities.absolute_maximum_capacity = Some(1.0);
    for caps in root.labels.values_mut() {
        caps.absolute_capacity = Some(1.0);
        caps.absolute_maximum_capacity = Some(1.0);
    }
    for p in 0..queues.len() {
        let children = queues[p].children.clone();
        let mut partitions: Vec<Option<String>> = vec![None];
        partitions.extend(queues[p].labels.keys().cloned().map(Some));
        for label in partitions {
            let Some(parent) = queues[p].partition(label.as_deref()).cloned() else {
                continue;
            };
            let weight_sum: f64 = children
                .iter()
                .filter_map(|&c| match queues[c].partition(label.as_deref())?.capacity {
                    CapacityValue::Weight(w) => Some(w),
                    _ => None,
                })
                .sum();
            for &c in &children {
                let Some(caps) = partition_mut(&mut queues[c], label.as_deref()) else {
                    continue;
                };
                caps.absolute_capacity = match caps.capacity {
                    CapacityValue::Percent(x) => parent.absolute_capacity.map(|a| a * x / 100.0),
                    CapacityValue::Weight(w) => parent.absolute_capacity.map(|a| {
                        if weight_sum > 0.0 {
                            a * w / weight_sum
                        } else {
                            0.0
                        }
                    }),
                    CapacityValue::Absolute(_) => None,
                };
                caps.absolute_maximum_capacity = match caps.maximum_capacity {
                    CapacityValue::Percent(x) => {
                        parent.absolute_maximum_capacity.map(|a| a * x / 100.0)
                    }
                    _ => None,
                };
            }
        }
    }
}

/// Defaults that `yarn.scheduler.capacity.<key>` sets for every queue.
pub(super) struct Defaults {
    user_limit_factor: f64,
    minimum_user_limit_percent: f64,
    maximum_am_resource_percent: f64,
}

/// A parent that can access a label its children have capacities for has a capacity
/// for it too: 0 unless set (root: 100), as in YARN, so the children's sum is checked
/// against it.
pub(super) fn fill_label_partitions(queues: &mut [QueueConfig]) {
    for i in (1..queues.len()).rev() {
        let Some(p) = queues[i].parent else {
            continue;
        };
        let labels: Vec<String> = queues[i].labels.keys().cloned().collect();
        let parent = &mut queues[p];
        let default = if parent.is_root() { 100.0 } else { 0.0 };
        for label in labels {
            if parent.accessible_node_labels.can_access(&label) {
                parent
                    .labels
                    .entry(label)
                    .or_insert_with(|| Capacities::unset(default));
            }
        }
    }
}

pub(super) fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

pub(super) fn partition_mut<'q>(
    q: &'q mut QueueConfig,
    label: Option<&str>,
) -> Option<&'q mut Capacities> {
    match label {
        None => Some(&mut q.capacities),
        Some(l) => q.labels.get_mut(l),
    }
}

pub(super) fn round_percent(fraction: f64) -> f64 {
    (fraction * 100.0 * 1e4).round() / 1e4
}

pub(super) fn invalid_queue_name(name: &str) -> Option<&'static str> {
    if name.contains('.') {
        Some("queue names cannot contain '.'")
    } else if name.chars().any(char::is_whitespace) {
        Some("queue names cannot contain whitespace")
    } else {
        None
    }
}

pub(super) fn valid_label(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(super) fn parse_state(s: &str) -> Result<QueueState, String> {
    match s.trim().to_ascii_uppercase().as_str() {
        "RUNNING" => Ok(QueueState::Running),
        "STOPPED" => Ok(QueueState::Stopped),
        _ => Err("expected RUNNING or STOPPED".into()),
    }
}

/// YARN 3.3+ reads -1 as "no limit".
pub(super) fn parse_user_limit_factor(s: &str) -> Result<f64, String> {
    match parse_f64(s)? {
        v if v == -1.0 || v >= 0.0 => Ok(v),
        _ => Err("expected -1 (no limit) or a non-negative number".into()),
    }
}

pub(super) fn parse_user_limit_percent(s: &str) -> Result<f64, String> {
    match parse_f64(s)? {
        v if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err("expected a percentage above 0, up to 100".into()),
    }
}
