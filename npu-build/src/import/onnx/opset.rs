//! Opsets 10 to 12: nodes written in an older operator version are rewritten into their
//! opset-13 form before mapping (attributes that later became inputs are bound as constants).
//!
//! The differences handled (ONNX operator changelog):
//! - `Squeeze`, `Unsqueeze` (before 13): `axes` is an attribute.
//! - `Clip` (before 11): `min` / `max` are attributes.
//! - `Pad` (before 11): `pads` and `value` are attributes.
//! - `Resize` (10): inputs `(X, scales)`; the coordinates are "asymmetric" and nearest
//!   neighbours are taken by rounding down, as opset 10 defines them.
//! - `Softmax` (before 13) works on the input flattened to 2-D; see `qop::softmax_axis`.

use std::rc::Rc;

use super::builder::{Builder, Val};
use super::constant::{Const, Elems};
use super::model::Node;
use super::proto::{self, attribute_type as at};
use crate::error::Result;

fn string_attr(name: &str, v: &str) -> proto::AttributeProto {
    proto::AttributeProto {
        name: name.to_string(),
        r#type: at::STRING,
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

impl Builder {
    /// The opset-13 form of a node of an older opset, or `None` when it needs no rewrite.
    pub(crate) fn upgrade_legacy(&mut self, n: &Node) -> Result<Option<Node>> {
        if self.opset >= 13 || !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Ok(None);
        }
        let prefix = n.outputs.first().cloned().unwrap_or_else(|| n.name.clone());
        let mut up = n.clone();
        let bind_const = |b: &mut Builder, role: &str, c: Const| -> String {
            let name = format!("{prefix}/{role}");
            b.bind(&name, Val::Const(Rc::new(c)));
            name
        };
        let drop =
            |up: &mut Node, names: &[&str]| up.attrs.retain(|a| !names.contains(&a.name.as_str()));
        match n.op_type.as_str() {
            "Squeeze" | "Unsqueeze" => {
                let Some(axes) = n.attr_ints("axes")? else {
                    return Ok(None);
                };
                n.max_inputs(1)?;
                let name = bind_const(self, "axes", Const::i64_vec(axes));
                up.inputs = vec![n.req_input(0)?.to_string(), name];
                drop(&mut up, &["axes"]);
            }
            // Each rewrite applies only to the old form, so a rewritten node is left alone.
            "Clip" if self.opset < 11 => {
                if n.attr_f("min")?.is_none() && n.attr_f("max")?.is_none() {
                    return Ok(None);
                }
                n.max_inputs(1)?;
                let mut inputs = vec![n.req_input(0)?.to_string()];
                for bound in ["min", "max"] {
                    match n.attr_f(bound)? {
                        Some(v) => inputs.push(bind_const(
                            self,
                            bound,
                            Const {
                                dims: Vec::new(),
                                elems: Elems::F32(vec![v]),
                            },
                        )),
                        None => inputs.push(String::new()),
                    }
                }
                up.inputs = inputs;
                drop(&mut up, &["min", "max"]);
            }
            "Pad" if self.opset < 11 => {
                let Some(pads) = n.attr_ints("pads")? else {
                    return Ok(None);
                };
                n.max_inputs(1)?;
                let value = n.attr_f("value")?.unwrap_or(0.0);
                let pads = bind_const(self, "pads", Const::i64_vec(pads));
                let value = bind_const(
                    self,
                    "value",
                    Const {
                        dims: Vec::new(),
                        elems: Elems::F32(vec![value]),
                    },
                );
                up.inputs = vec![n.req_input(0)?.to_string(), pads, value];
                drop(&mut up, &["pads", "value"]);
            }
            "Resize" if self.opset < 11 && n.inputs.len() == 2 => {
                let mode = n.attr_s("mode")?.unwrap_or_else(|| "nearest".into());
                up.inputs = vec![
                    n.req_input(0)?.to_string(),
                    String::new(),
                    n.req_input(1)?.to_string(),
                ];
                drop(&mut up, &["mode"]);
                up.attrs.push(string_attr("mode", &mode));
                up.attrs
                    .push(string_attr("coordinate_transformation_mode", "asymmetric"));
                up.attrs.push(string_attr("nearest_mode", "floor"));
            }
            _ => return Ok(None),
        }
        Ok(Some(up))
    }
}
